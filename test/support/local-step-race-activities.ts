/** The activities of test/support/local-step-race-workflows.ts; the first step hangs on a worker told to hang. */
export const raceActivities = {
  acceptStep: async (m: string): Promise<string> => m,
  nextStep: async (what: string): Promise<string> => what,
  firstStep: async (): Promise<void> => {
    if (process.env.RACE_FIRST_STEP_HANGS) await new Promise((resolve) => setTimeout(resolve, 120_000));
  },
  /** Outlives its workflow task's first extension (80% of 4 s), and ends within the task after it. */
  slowStep: async (): Promise<void> => {
    await new Promise((resolve) => setTimeout(resolve, 4_500));
  },
};
