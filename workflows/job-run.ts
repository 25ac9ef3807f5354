import { proxyActivities, sleep, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import type { DeliveryReport } from '../activities/delivery/deliver-reply';
import { failsAfterErrors, nextFire, retryDelayMs } from '../domain/jobs';
import { SA } from '../domain/search-attributes';
import { delivery, store } from './activities';

/** The turn may take as long as a turn does; it heartbeats while it waits. */
const turns = proxyActivities<KeelActivities>({
  startToCloseTimeout: '4 hours',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * One fire of a scheduled job (started by its Temporal Schedule): the task runs as a turn of the job's own
 * conversation, its result is delivered with the delivery's own retries, and the run is booked in one write. A failed
 * turn is retried here with the job backoff, until the next fire is sooner or the job has failed too often.
 */
export async function jobRunWorkflow(input: { jobId: string }): Promise<void> {
  const runId = workflowInfo().workflowId;
  const firedAt = workflowInfo().startTime;
  const begun = await store.beginJobRun({ runId, jobId: input.jobId, firedAt: firedAt.toISOString() });
  if (begun.kind === 'skipped') {
    upsertSearchAttributes([{ key: SA.outcome, value: 'skipped' }]);
    return;
  }
  const { job, backoffMs } = begun;
  const started = Date.now();
  const book = (b: { status: 'ok' | 'error'; reply?: string; error?: string; delivery?: DeliveryReport; fails?: boolean }) =>
    store.bookJobRun({
      runId,
      jobId: job.id,
      status: b.status,
      reply: b.reply,
      error: b.error,
      delivery: b.delivery,
      durationMs: Date.now() - started,
      nextRunAt: nextFire(job.schedule, new Date())?.toISOString() ?? null,
      completes: b.status === 'ok' && job.schedule.kind === 'at',
      fails: b.fails ?? false,
      deleteJob: b.status === 'ok' && job.deleteAfterRun,
    });

  for (let attempt = 1; ; attempt++) {
    const turn = await turns.runJobTurn({ agentId: job.agentId, jobId: job.id, task: job.task, messageId: `${runId}#${attempt}` });
    if (turn.status === 'ok') {
      const sent = turn.text
        ? await delivery.deliverJobResult({ runId, agentId: job.agentId, jobId: job.id, target: job.delivery, text: turn.text })
        : ({ outcome: 'skipped:empty_reply', attempts: 0 } satisfies DeliveryReport);
      await book({ status: 'ok', reply: turn.text, delivery: sent });
      upsertSearchAttributes([{ key: SA.outcome, value: 'ok' }]);
      return;
    }
    const errors = await store.recordJobRunError({ runId, jobId: job.id, error: turn.error });
    if (failsAfterErrors(job.schedule.kind, errors)) {
      const notice = await delivery.failJob({ jobId: job.id, agentId: job.agentId, name: job.name, error: turn.error, errors });
      await book({ status: 'error', error: turn.error, fails: true, delivery: notice });
      upsertSearchAttributes([{ key: SA.outcome, value: 'failed' }]);
      return;
    }
    const next = nextFire(job.schedule, new Date());
    const untilNext = next && job.schedule.kind !== 'at' ? next.getTime() - Date.now() : undefined;
    const delay = retryDelayMs(attempt, untilNext, backoffMs);
    // The next fire is sooner than the backoff: it takes over, and this run ends in error.
    if (untilNext !== undefined && delay >= untilNext) {
      await book({ status: 'error', error: turn.error });
      upsertSearchAttributes([{ key: SA.outcome, value: 'error' }]);
      return;
    }
    await sleep(delay);
  }
}
