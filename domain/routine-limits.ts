/**
 * Wuphf's routine numbers, kept, and the floor Keel adds. Free of schemas, so that the workflow bundle holds none
 * (issue 27).
 */
export const ROUTINES = {
  /** The shortest gap between two fires of a routine, unless configured otherwise. */
  defaultFloorMs: 15 * 60_000,
  smokeRunLimitMs: 8_000,
  /** A tool run's wall clock (Wuphf's #1209 raised its 5 s to 120 s). */
  runLimitMs: 120_000,
  /**
   * The tool-run activity's start-to-close timeout (10 minutes). The wall clock must stay below it: a longer one
   * would be cut off by Temporal and retried as a lost worker instead of ending the run with its own message.
   */
  toolRunTimeoutMs: 600_000,
  /** What the tool run does besides the sandbox (loading the tool and journal, recording the run) may take this. */
  toolRunOverheadMs: 60_000,
  memoryLimitMb: 64,
  approvalWaitMs: 7 * 24 * 3_600_000,
  crashDetailChars: 240,
} as const;
