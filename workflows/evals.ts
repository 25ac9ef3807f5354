import { executeChild, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import type { EvalCaseInput, EvalInput, EvalOutcome } from '../contracts/evals';
import { EVALS } from '../domain/evals';
import { evalCaseWorkflowId } from '../domain/ids';
import { MODEL_CALL_RETRY } from './activities';

/**
 * A case's turn holds a model call in live-model mode, which heartbeats while it streams: a turn held by a killed
 * worker is retried elsewhere within 10 s. PostgreSQL steps retry without limit, as Keel's do.
 */
const evals = proxyActivities<KeelActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  retry: MODEL_CALL_RETRY,
});
const store = proxyActivities<KeelActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/**
 * An evaluation: each case runs as a child, a few side by side, then the evaluation's counts are kept. A case that
 * cannot run (its model refuses the request) fails the evaluation, named in its status.
 */
export async function evalWorkflow(input: EvalInput): Promise<EvalOutcome> {
  const { agentId, evalId } = input;
  try {
    for (let first = 0; first < input.cases.length; first += EVALS.concurrentCases) {
      const batch = input.cases.slice(first, first + EVALS.concurrentCases);
      await Promise.all(
        batch.map((c, i) =>
          executeChild(evalCaseWorkflow, {
            workflowId: evalCaseWorkflowId(agentId, evalId, first + i + 1),
            // The evaluation's agent and kind: the agent's deletion finds its cases too.
            typedSearchAttributes: workflowInfo().typedSearchAttributes,
            args: [{ evalId, caseId: c.caseId, turns: c.turns }],
          }),
        ),
      );
    }
  } catch (err) {
    await store.failEvaluation({ evalId, reason: rootCause(err) });
    throw err;
  }
  return await store.finishEvaluation({ evalId });
}

/** One case: its turns in order, each as the candidate runs it, then its verdict. */
export async function evalCaseWorkflow(input: EvalCaseInput): Promise<{ passed: boolean }> {
  const { evalId, caseId } = input;
  for (let turn = 1; turn <= input.turns; turn++) await evals.runEvalTurn({ evalId, caseId, turn });
  return await evals.scoreEvalCase({ evalId, caseId });
}

/** The failure's first cause: a child's failure wraps its activity's, which says what went wrong. */
function rootCause(err: unknown): string {
  let e = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
