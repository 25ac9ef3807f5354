import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import { NON_RETRYABLE_MODEL_FAILURES } from '../domain/failures';

/**
 * The retry policies of Keel's activities, named for what they protect. Database steps retry without limit: an
 * outage of PostgreSQL is waited out, never turned into lost work.
 */
export const store = proxyActivities<KeelActivities>({
  // Short enough that a step held by a killed worker is retried elsewhere soon (they do not heartbeat).
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/** Model calls: retryable provider failures back off (or wait out Retry-After); request errors do not retry. */
export const model = proxyActivities<KeelActivities>({
  startToCloseTimeout: '10 minutes',
  // The model activity heartbeats while it streams; a dead worker is noticed within this.
  heartbeatTimeout: '10 seconds',
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
  // One send per attempt (the transports time out at 10 s): a delivery held by a killed worker is retried after this.
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});
