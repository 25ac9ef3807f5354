/**
 * An agent's delegates as a person reads them, and a person cancelling one. What a delegate's workflow does, step by
 * step, is services/delegation.ts.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { cancelDelegate as cancelSignal } from '../contracts/delegate';
import { getDelegate } from '../db/delegates';
import type { Pool } from '../db/pool';
import { delegateWorkflowId } from '../domain/ids';

// Reads the API serves as they are.
export { getDelegate, listDelegates, type DelegateView } from '../db/delegates';

export type DelegateRefusal = { code: 'not_found' | 'delegate_finished'; message: string; status: 404 | 409 };
export type DelegateResult<T> = { ok: true; value: T } | { ok: false; error: DelegateRefusal };

const refuse = (
  code: DelegateRefusal['code'],
  message: string,
  status: DelegateRefusal['status'],
): DelegateResult<never> => ({ ok: false, error: { code, message, status } });

/**
 * Cancels a running delegate: its workflow is signalled, and the reason is kept in its outcome. A delegate that has
 * finished, before the read or before the signal, is refused.
 */
export async function cancelDelegate(
  pool: Pool,
  client: Client,
  agentId: string,
  delegateId: string,
  reason: string,
): Promise<DelegateResult<{ delegateId: string }>> {
  const d = await getDelegate(pool, agentId, delegateId);
  if (!d) return refuse('not_found', `delegate ${delegateId} not found`, 404);
  if (d.outcome)
    return refuse('delegate_finished', `delegate ${d.delegateId} already finished (${d.outcome.kind})`, 409);
  try {
    await client.workflow.getHandle(delegateWorkflowId(agentId, d.delegateId)).signal(cancelSignal, { reason });
  } catch (err) {
    // It finished between the read and the signal: its workflow is closed.
    if (err instanceof WorkflowNotFoundError)
      return refuse('delegate_finished', `delegate ${d.delegateId} already finished`, 409);
    throw err;
  }
  return { ok: true, value: { delegateId: d.delegateId } };
}
