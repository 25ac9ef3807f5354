import { proxyActivities } from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import type { ReplayOutcome, ReplayRunInput } from '../contracts/replay-run';

/** One attempt: a replay that fails to run is the operator's to retry, not Temporal's. */
const replayer = proxyActivities<KeelActivities>({ startToCloseTimeout: '100 seconds', retry: { maximumAttempts: 1 } });

/**
 * An operator's replay of a run, served by a worker: the history is replayed where the workflow code runs, against
 * the build this worker runs, never a bundle built elsewhere.
 */
export async function replayRunWorkflow(input: ReplayRunInput): Promise<ReplayOutcome> {
  return await replayer.replayRun(input);
}
