import { ActivityFailure, CancellationScope, condition, isCancellation } from '@temporalio/workflow';
import { attemptResult, type ToolCallAttempt, type ToolCallSource } from '../contracts/tool-calls';
import type { ToolResultBlock, ToolUseBlock } from '../domain/model';
import { toolResult } from '../domain/transcript';
import {
  refusalForModel,
  type PreparedToolCall,
  type ToolCallDecision,
  type ToolCallRefusal,
} from '../domain/tool-calls';
import { activitySteps, type TurnSteps } from './activities';

/**
 * A call of a tool server's tool, as the turn or delegate that asked for it waits for it: prepared (the policy, the
 * record), perhaps held for a person's decision, then run once. The wait is a workflow condition with a deadline: no
 * activity is held, and a worker that dies meanwhile changes nothing.
 */

/** The call a workflow waits on a person for, and the decision that came for it. */
export class ToolApprovals {
  private waiting?: { callId: string; argsDigest: string; decision?: ToolCallDecision };

  /** The Update's validator: only the call that waits, with exactly the arguments shown, and only once. */
  validate(d: ToolCallDecision): void {
    const w = this.waiting;
    if (!w || w.callId !== d.callId || w.decision) throw new Error(`tool call ${d.callId} is not waiting for approval`);
    if (w.argsDigest !== d.argsDigest) throw new Error(`tool call ${d.callId} waits with other arguments`);
  }

  decide(d: ToolCallDecision): { approved: boolean } {
    if (this.waiting) this.waiting.decision = d;
    return { approved: d.approved };
  }

  /**
   * Waits for the decision until the deadline, or until `cancelled` names a reason to stop waiting. The workflow
   * takes decisions for the call before the call enters the inbox (`open`), so that a decision sent from the inbox
   * always finds it waiting, whatever order Temporal hands the two to a worker in.
   */
  async waitFor(
    call: { callId: string; argsDigest: string; label: string },
    open: () => Promise<{ expiresInMs: number }>,
    cancelled: () => string | undefined,
  ): Promise<ToolCallDecision | ToolCallRefusal> {
    const waiting = { callId: call.callId, argsDigest: call.argsDigest } as NonNullable<typeof this.waiting>;
    this.waiting = waiting;
    try {
      const { expiresInMs } = await open();
      const decidedOrCancelled = () => waiting.decision !== undefined || cancelled() !== undefined;
      const ended = await condition(decidedOrCancelled, expiresInMs, {
        summary: `waiting for approval: ${call.label}`,
      });
      if (waiting.decision) return waiting.decision;
      const reason = cancelled();
      if (ended && reason) return { kind: 'cancelled', reason };
      return { kind: 'expired', waitedMs: expiresInMs };
    } finally {
      this.waiting = undefined;
    }
  }
}

/** Where a call comes from, the workflow a decision goes to, and what may end its wait early. */
export interface ServerToolContext {
  source: ToolCallSource;
  workflowId: string;
  approvals: ToolApprovals;
  /** A reason to stop waiting for a person (a newer message), or undefined. */
  cancelled: () => string | undefined;
  /** The proxies the caller takes its steps through. */
  steps: Pick<TurnSteps, 'local' | 'store' | 'tools'>;
  /** The call as the model step prepared (and perhaps ran) it already: no step of its own for that. */
  attempt?: ToolCallAttempt;
}

export async function runServerTool(call: ToolUseBlock, ctx: ServerToolContext): Promise<ToolResultBlock> {
  const { store, tools } = ctx.steps;
  const input = { ...ctx.source, toolUse: call, workflowId: ctx.workflowId };
  let prepared: PreparedToolCall | ToolCallAttempt;
  if (ctx.attempt) prepared = ctx.attempt;
  else if (ctx.steps.local) {
    // A turn in one workflow task prepares a call and runs it in one step when its policy lets it run at once.
    try {
      prepared = await tools.prepareAndRunToolCall.executeWithOptions({ summary: `tool ${call.name}` }, [input]);
    } catch (err) {
      if (isCancellation(err)) throw err;
      return toolResult(call.id, `tool ${call.name} failed: ${causeOf(err)}`, true);
    }
  } else prepared = await store.prepareToolCall(input);
  if (prepared.kind === 'ran' || prepared.kind === 'answer') return attemptResult(call.id, prepared);
  let how: string = prepared.kind === 'run' ? prepared.policy : 'approved';
  if (prepared.kind === 'approve') {
    const answer = await waitForPerson(prepared, ctx);
    if ('kind' in answer) return toolResult(call.id, refusalForModel(prepared.label, answer), true);
    if (!answer.approved)
      return toolResult(call.id, refusalForModel(prepared.label, { kind: 'rejected', note: answer.note }), true);
    how = 'approved';
  }
  // An approved call runs as an ordinary activity: the workflow task that took the decision ends at once, and with it
  // the person's request, instead of waiting for the turn's next local steps.
  const runner = how === 'approved' ? activitySteps.tools : tools;
  try {
    const result = await runner.runToolCall.executeWithOptions({ summary: `${prepared.label} (${how})` }, [
      { callId: prepared.callId },
    ]);
    return toolResult(call.id, result.content, result.isError, result.ref);
  } catch (err) {
    if (isCancellation(err)) throw err;
    return toolResult(call.id, `${prepared.label} failed: ${causeOf(err)}`, true);
  }
}

const causeOf = (err: unknown) => (err instanceof ActivityFailure && err.cause ? err.cause.message : String(err));

/** The wait, and its end recorded whatever it is: a cancel of the whole workflow still settles the record. */
async function waitForPerson(
  prepared: { callId: string; argsDigest: string; label: string },
  ctx: ServerToolContext,
): Promise<ToolCallDecision | ToolCallRefusal> {
  const { store } = ctx.steps;
  let answer: ToolCallDecision | ToolCallRefusal;
  try {
    const open = () => store.openToolCallApproval({ callId: prepared.callId });
    answer = await ctx.approvals.waitFor(prepared, open, ctx.cancelled);
  } catch (err) {
    if (isCancellation(err)) {
      const refusal = { kind: 'cancelled' as const, reason: 'the run waiting for it was cancelled' };
      await CancellationScope.nonCancellable(() =>
        store.settleToolCallWait({ callId: prepared.callId, decision: null, refusal }),
      );
    }
    throw err;
  }
  const decision = 'kind' in answer ? null : answer;
  const refusal = 'kind' in answer && answer.kind !== 'rejected' ? answer : undefined;
  await store.settleToolCallWait({ callId: prepared.callId, decision, ...(refusal ? { refusal } : {}) });
  return answer;
}
