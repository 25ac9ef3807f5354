import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { beginRun, bookRun, deleteJob, insertJob, moveJob, type RunBooking } from '../db/jobs';
import { createPool, type Pool } from '../db/pool';
import { uniqueId } from './support/keel';

let pool: Pool;
beforeAll(() => {
  pool = createPool(inject('databaseUrl'));
});
afterAll(async () => pool?.end());

async function newJob(deleteAfterRun = false) {
  const agentId = uniqueId('a');
  await pool.query('INSERT INTO agents (id, name) VALUES ($1, $1)', [agentId]);
  return insertJob(pool, {
    id: uniqueId('job'),
    agentId,
    name: 'report',
    schedule: { kind: 'every', intervalMs: 60_000 },
    task: 'report',
    target: { delivery: { channel: 'none' } },
    deliveryChosenBy: 'user',
    deleteAfterRun,
    createdBy: 'user',
    nextRunAt: new Date(),
  });
}

const runs = async (jobId: string) =>
  (
    await pool.query<{ run_id: string; status: string; error: string | null }>(
      'SELECT run_id, status, error FROM job_runs WHERE job_id = $1 ORDER BY fired_at, run_id',
      [jobId],
    )
  ).rows;

const audit = async (jobId: string) =>
  (await pool.query<{ action: string }>('SELECT action FROM job_audit WHERE job_id = $1 ORDER BY id', [jobId])).rows;

describe('job runs: their beginning and booking (real PostgreSQL)', () => {
  it('a fire begins a run; begun again, the same decision; another fire meanwhile is busy', async () => {
    const job = await newJob();
    const r = (n: number) => `${job.id}-r${n}`;
    const at = new Date('2026-12-07T10:00:00Z');
    const first = await beginRun(pool, r(1), job.id, at);
    expect(first.kind === 'run' && first.job.id).toBe(job.id);
    const again = await beginRun(pool, r(1), job.id, at);
    expect(again.kind === 'run' && again.job.task).toBe('report');
    expect(await beginRun(pool, r(2), job.id, new Date('2026-12-07T10:01:00Z'))).toEqual({
      kind: 'busy',
      runningRunId: r(1),
    });
    expect(await runs(job.id)).toEqual([{ run_id: r(1), status: 'running', error: null }]);
  });

  it('a stale fire, a paused job and a deleted one are skipped, each with its reason, and stay so', async () => {
    const job = await newJob();
    const r = (n: number) => `${job.id}-r${n}`;
    const booking: RunBooking & { deleteJob: boolean } = {
      runId: r(1),
      jobId: job.id,
      status: 'ok',
      durationMs: 5,
      nextRunAt: null,
      completes: false,
      fails: false,
      deleteJob: false,
    };
    await beginRun(pool, r(1), job.id, new Date('2026-12-07T10:05:00Z'));
    await bookRun(pool, booking);
    const stale = { kind: 'skipped', reason: 'a later fire has already run' };
    expect(await beginRun(pool, r(0), job.id, new Date('2026-12-07T10:00:00Z'))).toEqual(stale);
    expect(await beginRun(pool, r(0), job.id, new Date('2026-12-07T10:00:00Z'))).toEqual(stale);
    await moveJob(pool, job.id, 'active', 'paused');
    const paused = { kind: 'skipped', reason: 'the job is paused' };
    expect(await beginRun(pool, r(2), job.id, new Date('2026-12-07T10:10:00Z'))).toEqual(paused);
    expect((await runs(job.id)).map((r) => [r.run_id, r.status, r.error])).toEqual([
      [r(0), 'skipped', 'a later fire has already run'],
      [r(1), 'ok', null],
      [r(2), 'skipped', 'the job is paused'],
    ]);
    await deleteJob(pool, job.id);
    const deleted = { kind: 'skipped', reason: 'the job was deleted' };
    expect(await beginRun(pool, r(3), job.id, new Date('2026-12-07T10:15:00Z'))).toEqual(deleted);
  });

  it('a booking taken again changes nothing: one run counted, one audit of its failure and deletion', async () => {
    const job = await newJob(true);
    const r = (n: number) => `${job.id}-r${n}`;
    await beginRun(pool, r(1), job.id, new Date('2026-12-07T10:00:00Z'));
    const booking: RunBooking & { deleteJob: boolean } = {
      runId: r(1),
      jobId: job.id,
      status: 'error',
      error: 'no answer',
      durationMs: 1234.4,
      nextRunAt: null,
      completes: false,
      fails: true,
      deleteJob: true,
    };
    await bookRun(pool, booking);
    await bookRun(pool, booking);
    const { rows } = await pool.query<{ run_count: number; status: string; last_run_duration_ms: number }>(
      'SELECT run_count, status, last_run_duration_ms FROM jobs WHERE id = $1',
      [job.id],
    );
    expect(rows).toEqual([{ run_count: 1, status: 'failed', last_run_duration_ms: 1234 }]);
    expect(await runs(job.id)).toEqual([{ run_id: r(1), status: 'error', error: 'no answer' }]);
    expect(await audit(job.id)).toEqual([{ action: 'fail' }, { action: 'delete-after-run' }]);
    const detail = await pool.query('SELECT detail FROM job_audit WHERE job_id = $1 AND action = $2', [job.id, 'fail']);
    expect(detail.rows).toEqual([{ detail: { error: 'no answer' } }]);
  });
});
