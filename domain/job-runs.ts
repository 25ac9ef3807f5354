/**
 * A job's runs as its workflow runs them: the scheduler's numbers, retries and what a delivery does to a one-shot.
 * Free of schemas, so that the workflow bundle holds none (issue 27); a job's schemas and checks are in jobs.ts.
 */
import type { DeliveryReport } from './delivery';
import { outcomeKind, type DeliveryOutcome } from './delivery-outcome';

/** Phantom's scheduler numbers, kept. */
export const JOBS = {
  maxJobsPerAgent: 1000,
  taskBytes: 32_768,
  nameChars: 200,
  descriptionChars: 1000,
  /** The shortest `every` interval, unless configured otherwise. */
  defaultEveryFloorMs: 60_000,
  /** Retry delays of a failed run: 30 s, 1 min, 5 min, 15 min, then every 60 min. */
  backoffMs: [30_000, 60_000, 300_000, 900_000, 3_600_000],
  oneShotMaxErrors: 3,
  maxConsecutiveErrors: 10,
  defaultCatchupWindowMs: 600_000,
  /**
   * A run waiting for its turn reads the turn from PostgreSQL this often besides the conversation's signal: a turn
   * whose conversation was terminated outside Keel is taken up by the next run, which has no one to tell.
   */
  turnRecheckMs: 120_000,
  /**
   * How long a run waits for its turn before it books an error naming why (the conversation's workflow task failing,
   * the conversation gone): no run waits forever on another workflow.
   */
  turnDeadlineMs: 900_000,
  /**
   * A fire that finds the previous run open with its workflow task failed this many times over (a defect, or a
   * history its code no longer replays) ends that run instead of skipping: a stuck run never holds its job.
   */
  stuckRunAttempts: 3,
} as const;

/**
 * The delay before retry `n` (1-based) of a failed run: 30 s, 1 min, 5 min, 15 min, then 60 min; a cron job retries
 * no later than its next fire (which then takes over).
 */
export function retryDelayMs(
  retry: number,
  untilNextFireMs?: number,
  backoff: readonly number[] = JOBS.backoffMs,
): number {
  const step = backoff[Math.min(retry, backoff.length) - 1] ?? backoff[backoff.length - 1]!;
  return untilNextFireMs !== undefined ? Math.min(step, Math.max(0, untilNextFireMs)) : step;
}

/** What consecutive errors do to a job: a one-shot fails after 3, any job after 10. */
export function failsAfterErrors(kind: 'at' | 'every' | 'cron', consecutiveErrors: number): boolean {
  return consecutiveErrors >= (kind === 'at' ? JOBS.oneShotMaxErrors : JOBS.maxConsecutiveErrors);
}

/**
 * What a successful run's delivery outcome does to a job that deletes itself after its run (`deleteAfterRun`): it
 * goes only once its result was `delivered`, or `skipped:` because there was nowhere to send it. A delivery that
 * failed for good (`error:`, `dropped:`) keeps it, `failed`: the cascade would take the run that records the outcome,
 * and the owner is told instead. Other jobs are `kept` (a one-shot completes as before).
 */
export function afterDelivery(deleteAfterRun: boolean, outcome: DeliveryOutcome): 'kept' | 'deleted' | 'failed' {
  if (!deleteAfterRun) return 'kept';
  const kind = outcomeKind(outcome);
  return kind === 'delivered' || kind === 'skipped' ? 'deleted' : 'failed';
}

/** Booked when a run's turn is over but PostgreSQL has no end for it. */
export const TURN_END_MISSING = 'the turn ended without its end committed';

/** How a run ended, as its booking takes it. */
export interface RunEnd {
  status: 'ok' | 'error';
  reply?: string;
  error?: string;
  delivery?: DeliveryReport;
  /** The job failed for good. */
  fails?: boolean;
}

/**
 * A run's booking: a one-shot that ran is completed, and a self-deleting job goes with its run's write, unless it
 * failed. One home for the workflow's bookings and the one a run taken in one step makes (job-run-at-once).
 */
export function runBooking(
  run: { runId: string; jobId: string; kind: 'at' | 'every' | 'cron'; deleteAfterRun: boolean },
  end: RunEnd,
  durationMs: number,
) {
  const fails = end.fails ?? false;
  return {
    runId: run.runId,
    jobId: run.jobId,
    status: end.status,
    reply: end.reply,
    error: end.error,
    delivery: end.delivery,
    durationMs,
    completes: end.status === 'ok' && run.kind === 'at',
    fails,
    deleteJob: end.status === 'ok' && run.deleteAfterRun && !fails,
  };
}
