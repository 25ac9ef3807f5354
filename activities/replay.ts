import { Context } from '@temporalio/activity';
import type { ReplayOutcome, ReplayRunInput } from '../contracts/replay-run';
import { replayRun, type WorkflowSource } from '../services/replay';

export function replayActivities(deps: { workflows: WorkflowSource }) {
  return {
    /** An operator's replay of a run against the workflow code this worker runs. */
    replayRun: (input: ReplayRunInput): Promise<ReplayOutcome> =>
      replayRun(Context.current().client, deps.workflows, input),
  };
}
