import { ActivityCancellationType, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import { NON_RETRYABLE_MODEL_FAILURES } from '../domain/failures';

/**
 * The retry policies of Keel's activities, named for what they protect. Database steps retry without limit: an
 * outage of PostgreSQL is waited out, never turned into lost work.
 */
export const store = proxyActivities<KeelActivities>({
  // Short enough that a step held by a killed worker is retried elsewhere soon (they do not heartbeat).
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/**
 * The same short PostgreSQL steps as local activities: run by the worker inside the workflow task that asks for them,
 * so a turn's bookkeeping adds a marker to history instead of a scheduled activity and two more workflow tasks. They
 * are idempotent (keyed by ids that history holds), so a run after a lost workflow task repeats no effect. Only a
 * workflow's main loop awaits them, one at a time: local activities awaited by two coroutines at once (an update
 * handler's and the loop's) may resolve in another order on replay than they did at first. Retried without limit
 * too; past the local threshold each retry waits on a durable timer.
 */
export const steps = proxyLocalActivities<KeelActivities>({
  startToCloseTimeout: '10 seconds',
  localRetryThreshold: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/** Model calls: retryable provider failures back off (or wait out Retry-After); request errors do not retry. */
export const model = proxyActivities<KeelActivities>({
  startToCloseTimeout: '10 minutes',
  // The model activity heartbeats while it streams (at most every second); a dead worker is noticed within this.
  heartbeatTimeout: '5 seconds',
  // An interrupt waits for the activity to keep its partial text before the turn moves on.
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 10,
    nonRetryableErrorTypes: NON_RETRYABLE_MODEL_FAILURES,
  },
});

/** Deliveries count their own send attempts in the effects ledger; Temporal retries until the ledger says done. */
export const delivery = proxyActivities<KeelActivities>({
  // One send per attempt (the transports time out at 10 s); it heartbeats while it sends, so a delivery held by a
  // killed worker is retried after the heartbeat timeout.
  startToCloseTimeout: '20 seconds',
  heartbeatTimeout: '5 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});
