/**
 * What waits for a person's decision (routine runs stopped at a gate, reflection proposals), and sending that
 * decision to the workflow waiting for it.
 */
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { recordAudit, type NewAuditEntry } from '../db/audit';
import type { Pool } from '../db/pool';
import { temporalUnavailable } from './temporal-status';

// Reads the API serves as they are.
export { pendingApprovals, type PendingApproval } from '../db/approvals';

/**
 * How a decision fared: Temporal took it; or it was refused, as the workflow no longer waits for it (decided
 * meanwhile, no longer waiting, or gone); or Temporal or every worker did not take it in time.
 */
export type DecisionAnswer = 'taken' | 'not_waiting' | 'not_in_time';

/**
 * A person's decision, sent to the workflow waiting for it as an Update within `deadlineMs`. A decision Temporal
 * took goes into the audit trail; one it refused changed nothing and does not. Deciding twice is refused, so a
 * decision not taken in time is safe to send again. Anything else Temporal refuses is thrown as it is.
 */
export async function submitDecision(
  temporal: Client,
  deadlineMs: number,
  update: () => Promise<unknown>,
  audit: { pool: Pool; entry: NewAuditEntry },
): Promise<DecisionAnswer> {
  try {
    await temporal.withDeadline(Date.now() + deadlineMs, update);
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError || err instanceof WorkflowNotFoundError) return 'not_waiting';
    // Only "not in time" is worth a retry; anything else Temporal refuses goes to the caller as what it is.
    if (temporalUnavailable(err)) return 'not_in_time';
    throw err;
  }
  await recordAudit(audit.pool, audit.entry);
  return 'taken';
}

/** A person's decision on what waited for it, as the audit trail records it: who, which way, and their note. */
export function decisionAudit(
  what: 'proposal' | 'routine_run' | 'tool_call',
  d: { agentId: string; subject: string; approved: boolean; note?: string | undefined; actor: string },
): NewAuditEntry {
  return {
    agentId: d.agentId,
    action: d.approved ? `${what}.approve` : `${what}.reject`,
    actor: d.actor,
    subject: d.subject,
    detail: d.note ? { note: d.note } : undefined,
  };
}
