import type { Client } from '@temporalio/client';
import { decideToolCall } from '../contracts/tool-calls';
import type { Pool } from '../db/pool';
import * as calls from '../db/tool-calls';
import type { ToolCallDecision } from '../domain/tool-calls';
import { decisionAudit, submitDecision, type DecisionAnswer } from './approvals';

/** Tool calls as the API lists them, and a person's decision on one that waits. */
export { listToolCalls, toolCall, type ToolCallRow } from '../db/tool-calls';

export type ToolCallDecisionAnswer =
  | { ok: true; call: calls.ToolCallRow }
  | { ok: false; why: 'not_found' }
  | { ok: false; why: 'not_awaiting_approval'; status: string }
  | { ok: false; why: Exclude<DecisionAnswer, 'taken'> };

/**
 * A person's decision on a call that waits, sent to the turn or delegate waiting for it, bound to the arguments the
 * record holds: the workflow takes it only for that call, with those arguments, once.
 */
export async function decideOnToolCall(
  pool: Pool,
  temporal: Client,
  deadlineMs: number,
  d: { agentId: string; callId: string; approved: boolean; note: string | undefined; actor: string },
): Promise<ToolCallDecisionAnswer> {
  const call = await calls.toolCall(pool, d.callId);
  if (!call || call.agentId !== d.agentId) return { ok: false, why: 'not_found' };
  if (call.status !== 'awaiting_approval') return { ok: false, why: 'not_awaiting_approval', status: call.status };
  const decision: ToolCallDecision = {
    callId: call.id,
    argsDigest: call.argsDigest,
    approved: d.approved,
    actor: d.actor,
    ...(d.note ? { note: d.note } : {}),
  };
  const answer = await submitDecision(
    temporal,
    deadlineMs,
    () => temporal.workflow.getHandle(call.workflowId).executeUpdate(decideToolCall, { args: [decision] }),
    { pool, entry: decisionAudit('tool_call', { ...d, subject: call.id }) },
  );
  if (answer !== 'taken') return { ok: false, why: answer };
  // The workflow records it too; written here as well, so that the answer already shows the decision.
  const status = d.approved ? 'approved' : 'rejected';
  const decided = await calls.decideToolCallRecord(pool, { id: call.id, status, actor: d.actor, note: d.note });
  return { ok: true, call: decided ?? (await calls.toolCall(pool, call.id))! };
}
