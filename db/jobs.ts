import { runDurationMs } from '../domain/run-duration';
import { NO_DELIVERY, type Delivery, type DeliveryOutcome } from '../domain/delivery';
import type { JobSchedule } from '../domain/jobs';
import type { Queryable } from './pool';
import { auditDetail } from './audit';

export type JobStatus = 'active' | 'paused' | 'completed' | 'failed';

export interface JobRow {
  id: string;
  agentId: string;
  name: string;
  description: string | null;
  schedule: JobSchedule;
  task: string;
  /** The Delivery a person gave; `none` when the job names a destination instead. */
  delivery: Delivery;
  /** The agent's destination the job delivers to, resolved at delivery time (null: `delivery` is the target). */
  destination: string | null;
  /** Who chose the target: a person through the API, or the model through its `schedule` tool. */
  deliveryChosenBy: 'agent' | 'user';
  deleteAfterRun: boolean;
  /** The job's own budget for each run (USD); null: the agent's perJobRunUsd applies. */
  budgetUsd: number | null;
  createdBy: 'agent' | 'user';
  status: JobStatus;
  nextRunAt: string | null;
  runCount: number;
  consecutiveErrors: number;
  lastRun: {
    at: string;
    status: string;
    durationMs: number | null;
    error: string | null;
    deliveryOutcome: string | null;
  } | null;
  createdAt: string;
}

interface JobRecord {
  id: string;
  agent_id: string;
  name: string;
  description: string | null;
  schedule: JobSchedule;
  task: string;
  delivery: Delivery | null;
  destination: string | null;
  delivery_chosen_by: 'agent' | 'user';
  delete_after_run: boolean;
  budget_usd: string | null;
  created_by: 'agent' | 'user';
  status: JobStatus;
  next_run_at: Date | null;
  run_count: number;
  consecutive_errors: number;
  last_run_at: Date | null;
  last_run_status: string | null;
  last_run_duration_ms: number | null;
  last_run_error: string | null;
  last_delivery_outcome: string | null;
  created_at: Date;
}

const toJob = (r: JobRecord): JobRow => ({
  id: r.id,
  agentId: r.agent_id,
  name: r.name,
  description: r.description,
  schedule: r.schedule,
  task: r.task,
  delivery: r.delivery ?? NO_DELIVERY,
  destination: r.destination,
  deliveryChosenBy: r.delivery_chosen_by,
  deleteAfterRun: r.delete_after_run,
  budgetUsd: r.budget_usd === null ? null : Number(r.budget_usd),
  createdBy: r.created_by,
  status: r.status,
  nextRunAt: r.next_run_at?.toISOString() ?? null,
  runCount: r.run_count,
  consecutiveErrors: r.consecutive_errors,
  lastRun: r.last_run_at
    ? {
        at: r.last_run_at.toISOString(),
        status: r.last_run_status ?? '',
        durationMs: r.last_run_duration_ms,
        error: r.last_run_error,
        deliveryOutcome: r.last_delivery_outcome,
      }
    : null,
  createdAt: r.created_at.toISOString(),
});

export async function jobCount(db: Queryable, agentId: string): Promise<number> {
  const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM jobs WHERE agent_id = $1', [agentId]);
  return Number(rows[0]!.n);
}

export async function jobNameTaken(db: Queryable, agentId: string, name: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM jobs WHERE agent_id = $1 AND lower(name) = lower($2)', [
    agentId,
    name.trim(),
  ]);
  return (rowCount ?? 0) > 0;
}

export interface NewJobRow {
  id: string;
  agentId: string;
  name: string;
  description?: string;
  schedule: JobSchedule;
  task: string;
  /** Exactly one of delivery and destination. */
  target: { delivery: Delivery } | { destination: string };
  deliveryChosenBy: 'agent' | 'user';
  deleteAfterRun: boolean;
  budgetUsd?: number;
  createdBy: 'agent' | 'user';
  nextRunAt: Date;
}

export async function insertJob(db: Queryable, j: NewJobRow): Promise<JobRow> {
  const { rows } = await db.query<JobRecord>(
    `INSERT INTO jobs (id, agent_id, name, description, schedule, task, delivery, destination, delivery_chosen_by,
       delete_after_run, created_by, status, next_run_at, budget_usd)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'active', $12, $13) RETURNING *`,
    [
      j.id,
      j.agentId,
      j.name.trim(),
      j.description ?? null,
      JSON.stringify(j.schedule),
      j.task,
      'delivery' in j.target ? JSON.stringify(j.target.delivery) : null,
      'destination' in j.target ? j.target.destination : null,
      j.deliveryChosenBy,
      j.deleteAfterRun,
      j.createdBy,
      j.nextRunAt,
      j.budgetUsd ?? null,
    ],
  );
  return toJob(rows[0]!);
}

export async function getJob(db: Queryable, agentId: string, jobId: string): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRecord>('SELECT * FROM jobs WHERE agent_id = $1 AND id = $2', [agentId, jobId]);
  return rows[0] ? toJob(rows[0]) : undefined;
}

export async function getJobById(db: Queryable, jobId: string): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRecord>('SELECT * FROM jobs WHERE id = $1', [jobId]);
  return rows[0] ? toJob(rows[0]) : undefined;
}

export async function findJobByName(db: Queryable, agentId: string, name: string): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRecord>('SELECT * FROM jobs WHERE agent_id = $1 AND lower(name) = lower($2)', [
    agentId,
    name.trim(),
  ]);
  return rows[0] ? toJob(rows[0]) : undefined;
}

export async function listJobs(db: Queryable, agentId: string): Promise<JobRow[]> {
  const { rows } = await db.query<JobRecord>('SELECT * FROM jobs WHERE agent_id = $1 ORDER BY created_at DESC', [
    agentId,
  ]);
  return rows.map(toJob);
}

/** A status change that only happens from the expected status (a pause during a run is never overwritten). */
export async function moveJob(
  db: Queryable,
  jobId: string,
  from: JobStatus,
  to: JobStatus,
  extra: { nextRunAt?: Date | null; resetErrors?: boolean } = {},
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE jobs SET status = $3, updated_at = now(),
       next_run_at = CASE WHEN $4::boolean THEN $5 ELSE next_run_at END,
       consecutive_errors = CASE WHEN $6::boolean THEN 0 ELSE consecutive_errors END
     WHERE id = $1 AND status = $2`,
    [jobId, from, to, extra.nextRunAt !== undefined, extra.nextRunAt ?? null, extra.resetErrors ?? false],
  );
  return (rowCount ?? 0) > 0;
}

export async function deleteJob(db: Queryable, jobId: string): Promise<void> {
  await db.query('DELETE FROM jobs WHERE id = $1', [jobId]);
}

export async function audit(
  db: Queryable,
  e: { jobId: string; agentId: string; action: string; actor: string; detail?: unknown },
): Promise<void> {
  const values = [e.jobId, e.agentId, e.action, e.actor, auditDetail(e.detail)];
  await db.query('INSERT INTO job_audit (job_id, agent_id, action, actor, detail) VALUES ($1, $2, $3, $4, $5)', values);
}

// ---- runs ---------------------------------------------------------------------------------------------------------

export type BeginRun =
  { kind: 'run'; job: JobRow } | { kind: 'skipped'; reason: string } | { kind: 'busy'; runningRunId: string };

/**
 * A fire begins a run, or is recorded as skipped: the job is not active, or another fire is still running. A fire
 * that begins reads and writes in one statement; a retried begin finds the decision already taken.
 */
export async function beginRun(db: Queryable, runId: string, jobId: string, firedAt: Date): Promise<BeginRun> {
  const { rows } = await db.query<
    Omit<JobRecord, 'id'> & {
      id: string | null;
      run_status: string | null;
      run_error: string | null;
      latest_fired_at: Date | null;
      inserted: boolean;
    }
  >(
    `WITH existing AS (SELECT status, error FROM job_runs WHERE run_id = $1),
     -- Fires that catch up after downtime run once: one older than the latest fire already taken is stale.
     latest AS (SELECT max(fired_at) AS fired_at FROM job_runs WHERE job_id = $2 AND status <> 'skipped'),
     inserted AS (
       INSERT INTO job_runs (run_id, job_id, fired_at, status)
       SELECT $1, $2, $3, 'running' FROM jobs
       WHERE id = $2 AND status = 'active' AND NOT EXISTS (SELECT 1 FROM existing)
         AND NOT COALESCE((SELECT fired_at FROM latest) > $3, false)
       ON CONFLICT (job_id) WHERE status = 'running' DO NOTHING
       RETURNING run_id
     )
     SELECT j.*, e.status AS run_status, e.error AS run_error, (SELECT fired_at FROM latest) AS latest_fired_at,
       EXISTS (SELECT 1 FROM inserted) AS inserted
     FROM (SELECT 1) AS one LEFT JOIN jobs j ON j.id = $2 LEFT JOIN existing e ON true`,
    [runId, jobId, firedAt],
  );
  const r = rows[0]!;
  const job = r.id === null ? undefined : toJob({ ...r, id: r.id });
  if (r.run_status !== null) {
    // A retried begin: the decision already taken stands.
    if (r.run_status === 'skipped') return { kind: 'skipped', reason: r.run_error ?? 'skipped' };
    return job ? { kind: 'run', job } : { kind: 'skipped', reason: 'the job was deleted' };
  }
  if (!job) return { kind: 'skipped', reason: 'the job was deleted' };
  if (r.inserted) return { kind: 'run', job };
  const skip = async (reason: string): Promise<BeginRun> => {
    await db.query(
      `INSERT INTO job_runs (run_id, job_id, fired_at, status, error, finished_at)
       VALUES ($1, $2, $3, 'skipped', $4, now())`,
      [runId, jobId, firedAt, reason],
    );
    return { kind: 'skipped', reason };
  };
  if (job.status !== 'active') return skip(`the job is ${job.status}`);
  if (r.latest_fired_at && r.latest_fired_at > firedAt) return skip('a later fire has already run');
  const running = await db.query<{ run_id: string }>(
    `SELECT run_id FROM job_runs WHERE job_id = $1 AND status = 'running'`,
    [jobId],
  );
  return { kind: 'busy', runningRunId: running.rows[0]?.run_id ?? '' };
}

export async function skipRun(
  db: Queryable,
  runId: string,
  jobId: string,
  firedAt: Date,
  reason: string,
): Promise<void> {
  await db.query(
    `INSERT INTO job_runs (run_id, job_id, fired_at, status, error, finished_at)
     VALUES ($1, $2, $3, 'skipped', $4, now()) ON CONFLICT DO NOTHING`,
    [runId, jobId, firedAt, reason],
  );
}

/** A running row whose workflow is gone (terminated outside Keel) no longer blocks the job's fires. */
export async function abandonRun(
  db: Queryable,
  runId: string,
  error = 'the run was abandoned (its workflow is closed)',
): Promise<void> {
  await db.query(
    `UPDATE job_runs SET status = 'error', error = $2, finished_at = now() WHERE run_id = $1 AND status = 'running'`,
    [runId, error],
  );
}

/**
 * One failed attempt: the run's attempt count and the job's consecutive errors, counted across fires, once per
 * attempt (a retried call counts nothing twice). Returns the job's error count and status (null: deleted).
 */
export async function recordRunError(
  db: Queryable,
  runId: string,
  jobId: string,
  attempt: number,
  error: string,
): Promise<{ errors: number; status: JobStatus | null }> {
  const counted = await db.query('UPDATE job_runs SET attempts = $3, error = $2 WHERE run_id = $1 AND attempts < $3', [
    runId,
    error,
    attempt,
  ]);
  const { rows } = await db.query<{ consecutive_errors: number; status: JobStatus }>(
    `UPDATE jobs SET consecutive_errors = consecutive_errors + $3, last_run_error = $2, updated_at = now()
      WHERE id = $1 RETURNING consecutive_errors, status`,
    [jobId, error, (counted.rowCount ?? 0) > 0 ? 1 : 0],
  );
  return { errors: rows[0]?.consecutive_errors ?? 0, status: rows[0]?.status ?? null };
}

export interface RunBooking {
  runId: string;
  jobId: string;
  status: 'ok' | 'error';
  reply?: string;
  error?: string;
  delivery?: { outcome: DeliveryOutcome; attempts: number };
  durationMs: number;
  nextRunAt: Date | null;
  /** ok for a one-shot: the job is completed (or, with delete-after-run, removed after this write). */
  completes: boolean;
  /** The job failed for good. */
  fails: boolean;
}

/**
 * The run, the job's bookkeeping and their audit in one statement, once: a retried call finds the run booked and
 * changes nothing, its audit included. A status set meanwhile (a pause) is never overwritten, and a one-shot that ran
 * is spent whatever its status. `deleteJob`: the job is removed after this write, which records why.
 */
export async function bookRun(db: Queryable, b: RunBooking & { deleteJob: boolean }): Promise<void> {
  await db.query(
    `WITH booked AS (
       UPDATE job_runs SET status = $2, reply = $3, error = $4, delivery_outcome = $5, delivery_attempts = $6,
              attempts = GREATEST(attempts, 1), finished_at = now()
       WHERE run_id = $1 AND status = 'running'
       RETURNING job_id
     ), job AS (
       UPDATE jobs SET run_count = run_count + 1, last_run_at = now(), last_run_status = $2,
         last_run_duration_ms = $8, last_run_error = $4,
         last_delivery_outcome = COALESCE($5, last_delivery_outcome),
         consecutive_errors = CASE WHEN $2 = 'ok' THEN 0 ELSE consecutive_errors END,
         next_run_at = $9,
         status = CASE WHEN status IN ('active', 'paused') AND $10::boolean THEN 'failed'
                       WHEN status IN ('active', 'paused') AND $11::boolean THEN 'completed'
                       ELSE status END,
         updated_at = now()
       WHERE id = $7 AND EXISTS (SELECT 1 FROM booked)
       RETURNING id, agent_id
     )
     INSERT INTO job_audit (job_id, agent_id, action, actor, detail)
     SELECT job.id, job.agent_id, a.action, 'scheduler', a.detail
     FROM job, (VALUES ('fail', $12::jsonb, $10::boolean), ('delete-after-run', NULL, $13::boolean))
       AS a (action, detail, wanted)
     WHERE a.wanted`,
    [
      b.runId,
      b.status,
      b.reply ?? null,
      b.status === 'ok' ? null : (b.error ?? null),
      b.delivery?.outcome ?? null,
      b.delivery?.attempts ?? 0,
      b.jobId,
      Math.round(b.durationMs),
      b.nextRunAt,
      b.fails,
      b.completes,
      auditDetail({ error: b.error }),
      b.deleteJob,
    ],
  );
}

export interface RunView {
  /** Also the run's workflow id. */
  runId: string;
  firedAt: string;
  startedAt: string;
  finishedAt: string | null;
  durationMs: number | null;
  status: 'running' | 'ok' | 'error' | 'skipped';
  reply?: string;
  error?: string;
  delivery: { outcome: string | null; attempts: number };
  /** Waiting for a budget to be raised: the budget's words (docs/spend.md). */
  budgetBlocked?: string;
}

export async function listRuns(db: Queryable, jobId: string): Promise<RunView[]> {
  const { rows } = await db.query<{
    run_id: string;
    fired_at: Date;
    started_at: Date;
    finished_at: Date | null;
    status: RunView['status'];
    reply: string | null;
    error: string | null;
    delivery_outcome: string | null;
    delivery_attempts: number;
    budget_blocked: string | null;
  }>('SELECT * FROM job_runs WHERE job_id = $1 ORDER BY fired_at, run_id', [jobId]);
  return rows.map((r) => {
    const [startedAt, finishedAt] = [r.started_at.toISOString(), r.finished_at?.toISOString() ?? null];
    return {
      runId: r.run_id,
      firedAt: r.fired_at.toISOString(),
      startedAt,
      finishedAt,
      durationMs: runDurationMs(startedAt, finishedAt),
      status: r.status,
      ...(r.reply !== null ? { reply: r.reply } : {}),
      ...(r.error !== null ? { error: r.error } : {}),
      delivery: { outcome: r.delivery_outcome, attempts: r.delivery_attempts },
      ...(r.budget_blocked !== null && r.status === 'running' ? { budgetBlocked: r.budget_blocked } : {}),
    };
  });
}

/** A running job run starts or stops waiting for a budget to be raised (the budget's words, or null). */
export async function markRunBudgetBlocked(db: Queryable, runId: string, reason: string | null): Promise<void> {
  await db.query(`UPDATE job_runs SET budget_blocked = $2 WHERE run_id = $1 AND status = 'running'`, [runId, reason]);
}

/** The agent's job runs waiting for a budget to be raised (their workflow ids are their run ids). */
export async function budgetBlockedRuns(db: Queryable, agentId: string): Promise<string[]> {
  const { rows } = await db.query<{ run_id: string }>(
    `SELECT r.run_id FROM job_runs r JOIN jobs j ON j.id = r.job_id
      WHERE j.agent_id = $1 AND r.status = 'running' AND r.budget_blocked IS NOT NULL`,
    [agentId],
  );
  return rows.map((r) => r.run_id);
}
