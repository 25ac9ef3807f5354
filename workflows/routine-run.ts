import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import {
  decideApproval,
  waitingGate,
  type ApprovalDecision,
  type RoutineRunInput,
  type RoutineRunOutcome,
} from '../contracts/routine-run';
import { ROUTINES } from '../domain/routine-limits';
import type { FinishedRunStatus, Gate, RoutineRunResult } from '../domain/routines';
import { SA } from '../domain/search-attributes';
import { MODEL_CALL_RETRY, store } from './activities';

/** Authoring: a model call plus a smoke run of a few seconds. */
const authoring = proxyActivities<KeelActivities>({
  startToCloseTimeout: '5 minutes',
  retry: MODEL_CALL_RETRY,
});

/** A tool run: bounded by the sandbox's wall clock; a retry replays the run's journal, so it repeats no effect. */
const tools = proxyActivities<KeelActivities>({
  // The configured wall clock is bounded below this (domain/config.ts).
  startToCloseTimeout: ROUTINES.toolRunTimeoutMs,
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

/**
 * One fire of a routine (started by its Temporal Schedule, overlap SKIP): choose the prompt, pick a saved tool or
 * author one, run it in the sandbox, stop at a gate until a human decides, and record the run. After approval the
 * tool runs again with the journal of its earlier calls replayed, so the gated effect happens once and nothing
 * before it repeats.
 */
export async function routineRunWorkflow(input: RoutineRunInput): Promise<RoutineRunOutcome> {
  // The run id is the workflow's run id: two fires in one second share a workflow id (Temporal appends the second).
  const { workflowId, firstExecutionRunId: runId, startTime } = workflowInfo();
  const ids = { runId, ...input };
  const begun = await store.beginRoutineRun({ ...ids, workflowId, firedAt: startTime.toISOString() });
  if (begun.kind === 'skipped') {
    upsertSearchAttributes([{ key: SA.outcome, value: 'skipped' }]);
    return { status: 'skipped', reason: begun.reason };
  }

  const prompt = begun.kind === 'run' ? begun.prompt : null;
  const finish = async (status: FinishedRunStatus, digest: string): Promise<RoutineRunResult> => {
    await store.finishRoutineRun({ ...ids, status, digest, prompt });
    upsertSearchAttributes([{ key: SA.outcome, value: status }]);
    return { status, digest, sessionId: begun.sessionId };
  };
  if (begun.kind === 'no_prompt') return finish('error', begun.reason);

  try {
    return await toolRun(ids, begun.prompt, begun.approvalWaitMs, finish);
  } catch (err) {
    // Whatever ended the run early (a model that refuses the request, retries run out, a cancel), it is recorded as an
    // error, so that the routine is not left with a run in flight that blocks its next fires.
    const reason = isCancellation(err) ? 'the run was cancelled' : `the run failed: ${failureMessage(err)}`;
    const result = await CancellationScope.nonCancellable(() => finish('error', reason));
    if (isCancellation(err)) throw err;
    return result;
  }
}

/** The tool part of a run: pick or author, run, and wait at each gate for a human. */
async function toolRun(
  ids: { runId: string; agentId: string; appId: string; slug: string },
  prompt: string,
  approvalWaitMs: number,
  finish: (status: FinishedRunStatus, digest: string) => Promise<RoutineRunResult>,
): Promise<RoutineRunResult> {
  const { runId } = ids;
  let tool = await store.findRoutineTool({ ...ids, prompt });
  if (!tool) {
    let draft = await authoring.draftRoutineTool({ ...ids, prompt });
    if (!draft.ok && draft.repairable)
      draft = await authoring.draftRoutineTool({ ...ids, prompt, repair: draft.failure });
    // A tool that still fails is not saved: no stub becomes durable behaviour.
    if (!draft.ok) return finish('error', `no tool could be authored: ${draft.failure}`);
    tool = await store.saveRoutineTool({ ...ids, tool: draft.tool });
  }

  let gate: Gate | null = null;
  let decision: ApprovalDecision | undefined;
  // Read through a function: the handler sets `decision` while the workflow awaits, which narrowing cannot see.
  const decided = (): ApprovalDecision | undefined => decision;
  setHandler(waitingGate, () => gate);
  setHandler(
    decideApproval,
    (d) => {
      decision = d;
      return { approved: d.approved };
    },
    {
      validator: (_d: ApprovalDecision) => {
        if (!gate || decision) throw new Error('this run is not waiting for approval');
      },
    },
  );

  const approvedSeqs: number[] = [];
  for (;;) {
    const ran = await tools.runRoutineTool({ ...ids, tool, prompt, approvedSeqs });
    if (ran.status === 'ok') return finish('ok', ran.digest);
    if (ran.status === 'error') return finish('error', ran.detail);

    gate = ran.gate;
    decision = undefined;
    await store.holdRoutineRun({ runId, gate });
    upsertSearchAttributes([{ key: SA.outcome, value: 'needs_approval' }]);
    await condition(() => decision !== undefined, approvalWaitMs, {
      summary: `waiting for approval: ${gate.capability} ${gate.detail.slice(0, 80)}`,
    });
    const waitedFor: Gate = gate;
    const answer = decided();
    gate = null;
    if (!answer)
      return finish(
        'rejected',
        `no decision within ${Math.round(approvalWaitMs / 3_600_000)} h, so nothing was done: ${waitedFor.detail}`,
      );
    await store.recordRoutineDecision({ runId, ...answer });
    if (!answer.approved)
      return finish(
        'rejected',
        `rejected${answer.note ? ` (${answer.note})` : ''}, so nothing was done: ${waitedFor.detail}`,
      );
    approvedSeqs.push(ran.seq);
  }
}

function failureMessage(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure || cause instanceof Error ? cause.message : String(cause);
}
