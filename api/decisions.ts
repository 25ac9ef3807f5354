import {
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  type Client,
} from '@temporalio/client';
import { recordAudit, type NewAuditEntry } from '../db/audit';
import type { Pool } from '../db/pool';
import { isTemporalUnavailable, temporalStatus } from '../services/temporal-status';
import { ApiError } from './errors';

/**
 * A human's decision, sent to the workflow waiting for it as an Update. Bounded: with Temporal or every worker down
 * the client gets a 503 (deciding twice is refused, so a retry is safe). A refusal of the validator (decided
 * meanwhile, or no longer waiting) or a workflow that is gone is a 409 saying `notWaiting`. A decision Temporal took
 * goes into the audit trail; one it refused changed nothing and does not.
 */
export async function sendDecision(
  temporal: Client,
  deadlineMs: number,
  update: () => Promise<unknown>,
  notWaiting: string,
  audit: { pool: Pool; entry: NewAuditEntry },
): Promise<void> {
  try {
    await temporal.withDeadline(Date.now() + deadlineMs, update);
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError || err instanceof WorkflowNotFoundError)
      throw new ApiError(409, 'not_awaiting_approval', notWaiting);
    // Only "not in time" is worth a retry; anything else Temporal refuses goes to the error handler as what it is.
    const status = temporalStatus(err);
    if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError || (status && isTemporalUnavailable(status))) {
      throw new ApiError(503, 'unavailable', 'Temporal or the Keel worker did not take the decision in time; retry');
    }
    throw err;
  }
  await recordAudit(audit.pool, audit.entry);
}
