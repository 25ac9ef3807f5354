/**
 * The delegate's lifecycle as its workflow runs it: the numbers, the outcome rules and the texts it sends. Free of
 * schemas, so that the workflow bundle holds none (issue 27); the task board's schemas are in delegation.ts.
 */
/** Spacebot's delegation numbers, kept. */
export const DELEGATION = {
  maxLiveDelegatesPerConversation: 5,
  modelCallsPerSegment: 15,
  maxSegments: 10,
  defaultWallClockSeconds: 1800,
  outcomeNudges: 2,
  retriggerDebounceMs: 500,
  retriggersPerUserMessage: 3,
  attemptSummaryChars: 280,
  /** Fork: the context window, less a 15% reserve, in chars/4 tokens; never fewer than 4 messages kept. */
  contextWindowTokens: 128_000,
  forkReserve: 0.15,
  forkMinMessages: 4,
  /** While delegates run, the conversation also reconciles on this interval, so a lost signal waits at most this. */
  reconcileIntervalMs: 60_000,
} as const;

export const OUTCOME_KINDS = ['success', 'partial', 'timeout', 'blocked', 'cancelled', 'failed'] as const;
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];
export type TerminalOwner = 'delegate' | 'cancel' | 'timeout' | 'reconcile';

/** Live states; a live state plus the event that ends it gives the outcome (the reference notes' race rules). */
export type LiveLifecycle = 'running' | 'cancelling' | 'timing_out' | 'completing';
export type EndEvent = 'success' | 'partial' | 'blocked' | 'failure' | 'cancel' | 'timeout';

/**
 * How a delegate ends, given what it was doing when the ending event arrived:
 * - a success wins over a pending cancel or timeout;
 * - a cancel or timeout while completing is partial;
 * - a failure or timeout while cancelling is partial with a transcript, else cancelled;
 * - a failure or cancel while timing out is a timeout; blocked while cancelling or timing out is partial.
 */
export function settleOutcome(state: LiveLifecycle, event: EndEvent, hasTranscript: boolean): OutcomeKind {
  if (event === 'success') return 'success';
  switch (state) {
    case 'running':
      return (
        { partial: 'partial', blocked: 'blocked', failure: 'failed', cancel: 'cancelled', timeout: 'timeout' } as const
      )[event];
    case 'completing':
      return event === 'cancel' || event === 'timeout'
        ? 'partial'
        : event === 'failure'
          ? 'failed'
          : event === 'blocked'
            ? 'blocked'
            : 'partial';
    case 'cancelling':
      if (event === 'failure' || event === 'timeout') return hasTranscript ? 'partial' : 'cancelled';
      if (event === 'blocked' || event === 'partial') return 'partial';
      return 'cancelled';
    case 'timing_out':
      if (event === 'blocked' || event === 'partial') return 'partial';
      return 'timeout';
  }
}

export const NUDGE_TEXT =
  'You answered without setting an outcome. ' +
  'When every step of the task is done, call set_status with kind "outcome"; if not, keep working.';
export const CONTINUE_TEXT = 'Continue where you left off. Do not repeat completed work.';
