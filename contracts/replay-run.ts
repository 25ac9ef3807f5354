/** A run's history replayed by a worker against the workflow code it runs: the API's replay route starts it. */
export const REPLAY_RUN_WORKFLOW = 'replayRunWorkflow';

export interface ReplayRunInput {
  workflowId: string;
  runId: string;
}

/** The outcome of replaying one history against the worker's workflow code. */
export interface ReplayOutcome {
  workflowId: string;
  runId: string;
  ok: boolean;
  /** The error's name and message: a determinism violation names the command that no longer matches. */
  error?: string;
}

export type ReplayRunWorkflow = (input: ReplayRunInput) => Promise<ReplayOutcome>;
