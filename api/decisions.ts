import type { Client } from '@temporalio/client';
import type { Pool } from '../db/pool';
import type { DecisionAnswer } from '../services/approvals';
import { ApiError } from './errors';

/**
 * The API's answer to a decision Temporal did not take: the workflow no longer waits for it (decided meanwhile, no
 * longer waiting, or gone) is a 409 saying `notWaiting`; not in time (Temporal or every worker down) is a 503.
 */
export const decisionNotTaken = (answer: Exclude<DecisionAnswer, 'taken'>, notWaiting: string): ApiError =>
  answer === 'not_waiting'
    ? new ApiError(409, 'not_awaiting_approval', notWaiting)
    : new ApiError(503, 'unavailable', 'Temporal or the Keel worker did not take the decision in time; retry');

/** What the routes that take a person's decision need: PostgreSQL, Temporal, and how long a decision may take. */
export interface DecisionRouteDeps {
  pool: Pool;
  temporal: Client;
  temporalDeadlineMs: number;
}
