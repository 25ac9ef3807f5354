/**
 * Job management, for the API and the agent's `schedule` tool alike: a job is a row in PostgreSQL and a Temporal
 * Schedule, changed together. Every function takes (pool, client, …) in that order.
 */
import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import {
  isGrpcServiceError,
  MONTHS,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  ServiceError,
  type Client,
  type ScheduleOptions,
  type ScheduleOptionsStartWorkflowAction,
} from '@temporalio/client';
import { JOB_RUN_WORKFLOW, type JobRunWorkflow } from '../contracts/job-run';
import { destinationBook, lockAgent } from '../db/agents';
import * as jobsDb from '../db/jobs';
import { inTransaction, type Pool } from '../db/pool';
import { NO_DELIVERY } from '../domain/delivery';
import { jobScheduleId } from '../domain/ids';
import { nextFire, validateNewJob, type JobRuleError, type JobSchedule, type NewJob } from '../domain/jobs';
import { SA } from '../domain/search-attributes';
import type { JobSettings } from './job-settings';
import { startActionNow } from './run-now';

// Reads the API serves as they are.
export { getJob, listJobs, type JobRow } from '../db/jobs';

type JobRefusal = { code: 'not_found' | 'not_active' | 'not_paused'; message: string; status: 404 | 409 };
export type JobResult<T> = { ok: true; value: T } | { ok: false; error: JobRuleError | JobRefusal };

/** The search attributes a job's Schedule starts each run with. */
export function jobRunSearchAttributes(agentId: string, jobId: string) {
  return [
    { key: SA.agentId, value: agentId },
    { key: SA.jobId, value: jobId },
    { key: SA.kind, value: 'job' },
  ];
}

/** The Temporal Schedule of a job: its fires start run workflows; overlap is left to the run (it records skips). */
function scheduleOptions(
  job: jobsDb.JobRow,
  s: JobSettings,
): ScheduleOptions<ScheduleOptionsStartWorkflowAction<JobRunWorkflow>> {
  return {
    scheduleId: jobScheduleId(job.id),
    spec: specOf(job.schedule),
    action: {
      type: 'startWorkflow',
      workflowType: JOB_RUN_WORKFLOW,
      workflowId: jobScheduleId(job.id),
      taskQueue: s.taskQueue,
      args: [{ jobId: job.id }],
      typedSearchAttributes: jobRunSearchAttributes(job.agentId, job.id),
      staticSummary: `Run of job "${job.name}"`,
    },
    // A fire while the previous run is busy still starts a run, which records itself as skipped: skipped fires are
    // visible in the job's runs (Temporal's own SKIP would drop them silently).
    policies: { overlap: ScheduleOverlapPolicy.ALLOW_ALL, catchupWindow: s.catchupWindowMs },
    state: job.schedule.kind === 'at' ? { remainingActions: 1 } : {},
    memo: { agent: job.agentId, job: job.name },
  };
}

function specOf(s: JobSchedule): ScheduleOptions['spec'] {
  switch (s.kind) {
    case 'at': {
      const at = new Date(s.at);
      const calendar = {
        year: at.getUTCFullYear(),
        month: MONTHS[at.getUTCMonth()]!,
        dayOfMonth: at.getUTCDate(),
        hour: at.getUTCHours(),
        minute: at.getUTCMinutes(),
        second: at.getUTCSeconds(),
      };
      return { calendars: [calendar], timezone: 'UTC' };
    }
    case 'every':
      // Phase the interval so the first fire is one interval from now, as nextRunAt says.
      return { intervals: [{ every: s.intervalMs, offset: Date.now() % s.intervalMs }] };
    case 'cron':
      return { cronExpressions: [s.expr], timezone: s.tz ?? 'UTC' };
  }
}

/**
 * Creates a job: the row and its Temporal Schedule both exist before this returns, or neither does. The same
 * validation serves the API and the agent's tool.
 */
export async function createJob(
  pool: Pool,
  client: Client,
  s: JobSettings,
  agentId: string,
  input: NewJob,
  createdBy: 'agent' | 'user',
): Promise<JobResult<jobsDb.JobRow>> {
  const id = randomUUID();
  try {
    return await inTransaction(pool, async (db) => {
      await lockAgent(db, agentId);
      const verdict = validateNewJob(input, {
        now: new Date(),
        existingJobs: await jobsDb.jobCount(db, agentId),
        nameTaken: await jobsDb.jobNameTaken(db, agentId, input.name),
        everyFloorMs: s.everyFloorMs,
        chosenBy: createdBy,
        destinations: await destinationBook(db, agentId),
      });
      if (!verdict.ok) return { ok: false, error: verdict.error };
      const target = input.delivery ?? NO_DELIVERY;
      const job = await jobsDb.insertJob(db, {
        id,
        agentId,
        name: input.name,
        description: input.description,
        schedule: verdict.schedule,
        task: input.task,
        // A name stays a name: the destination is resolved when a result is delivered, as configured then.
        target: typeof target === 'string' ? { destination: target } : { delivery: target },
        deliveryChosenBy: createdBy,
        // A one-shot the agent made removes itself after its run, by default.
        deleteAfterRun: input.deleteAfterRun ?? (createdBy === 'agent' && verdict.schedule.kind === 'at'),
        createdBy,
        nextRunAt: verdict.nextRunAt,
        ...(input.budgetUsd === undefined ? {} : { budgetUsd: input.budgetUsd }),
      });
      const detail = { name: job.name, schedule: job.schedule, destination: job.destination ?? undefined };
      await jobsDb.audit(db, { jobId: id, agentId, action: 'create', actor: createdBy, detail });
      await client.schedule.create(scheduleOptions(job, s));
      return { ok: true, value: job };
    });
  } catch (err) {
    // The row rolled back; a Schedule that may have been created (even by a call that timed out) is removed too.
    await client.schedule
      .getHandle(jobScheduleId(id))
      .delete()
      .catch(() => undefined);
    if (err instanceof ServiceError && isGrpcServiceError(err.cause) && err.cause.code === status.INVALID_ARGUMENT) {
      const message = `Temporal refused the schedule: ${err.cause.details}`;
      return { ok: false, error: { code: 'invalid_schedule', field: 'schedule', message, status: 400 } };
    }
    throw err;
  }
}

async function withJob<T>(
  pool: Pool,
  agentId: string,
  jobId: string,
  fn: (job: jobsDb.JobRow) => Promise<JobResult<T>>,
): Promise<JobResult<T>> {
  const job = await jobsDb.getJob(pool, agentId, jobId);
  if (!job) return { ok: false, error: { code: 'not_found', message: `job ${jobId} not found`, status: 404 } };
  return fn(job);
}

const refused = (code: 'not_active' | 'not_paused', message: string): JobResult<never> => ({
  ok: false,
  error: { code, message, status: 409 },
});

/** An action on one of an agent's jobs, by `actor` (a person's token, or the agent): the audit trail names it. */
type JobAction<T> = (
  pool: Pool,
  client: Client,
  agentId: string,
  jobId: string,
  actor: string,
) => Promise<JobResult<T>>;

/** The job as it is after `action`, which the job's audit log records. */
async function audited(pool: Pool, job: jobsDb.JobRow, action: string, actor: string) {
  await jobsDb.audit(pool, { jobId: job.id, agentId: job.agentId, action, actor });
  return { ok: true as const, value: (await jobsDb.getJob(pool, job.agentId, job.id))! };
}

/** Pause acts on the row and the Schedule together; a run under way finishes but leaves the job paused. */
export const pauseJob: JobAction<jobsDb.JobRow> = (pool, client, agentId, jobId, actor) =>
  withJob(pool, agentId, jobId, async (job) => {
    if (job.status !== 'active') return refused('not_active', `job ${job.name} is ${job.status}, not active`);
    // The Schedule first: if it cannot be paused, the row still says what is true.
    await client.schedule.getHandle(jobScheduleId(job.id)).pause(`paused by ${actor}`);
    // A paused job has no next fire: resume computes it anew.
    if (!(await jobsDb.moveJob(pool, job.id, 'active', 'paused', { nextRunAt: null }))) {
      return refused('not_active', `job ${job.name} changed meanwhile`);
    }
    return audited(pool, job, 'pause', actor);
  });

/** Resume recomputes the next run and resets the error count. */
export const resumeJob: JobAction<jobsDb.JobRow> = (pool, client, agentId, jobId, actor) =>
  withJob(pool, agentId, jobId, async (job) => {
    if (job.status !== 'paused') return refused('not_paused', `job ${job.name} is ${job.status}, not paused`);
    const next = nextFire(job.schedule, new Date());
    if (!next) {
      return refused('not_paused', `job ${job.name} has no future fire left (a one-shot whose time has passed)`);
    }
    await client.schedule.getHandle(jobScheduleId(job.id)).unpause(`resumed by ${actor}`);
    const nextRunAt = (await nextScheduledFire(client, job.id)) ?? next;
    if (!(await jobsDb.moveJob(pool, job.id, 'paused', 'active', { nextRunAt, resetErrors: true }))) {
      return refused('not_paused', `job ${job.name} changed meanwhile`);
    }
    return audited(pool, job, 'resume', actor);
  });

/** Run now: only an active job (409 otherwise); the run is the Schedule's own action, like any fire's. */
export const runJobNow = (pool: Pool, client: Client, s: JobSettings, agentId: string, jobId: string, actor: string) =>
  withJob(pool, agentId, jobId, async (job): Promise<JobResult<jobsDb.JobRow>> => {
    if (job.status !== 'active') return refused('not_active', `job ${job.name} is ${job.status}, not active`);
    await startActionNow(client, jobScheduleId(job.id), scheduleOptions(job, s).action);
    await jobsDb.audit(pool, { jobId: job.id, agentId, action: 'run', actor });
    return { ok: true, value: job };
  });

export const deleteJob: JobAction<{ id: string }> = (pool, client, agentId, jobId, actor) =>
  withJob(pool, agentId, jobId, async (job) => {
    await client.schedule
      .getHandle(jobScheduleId(job.id))
      .delete()
      .catch((err: unknown) => {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      });
    await inTransaction(pool, async (db) => {
      await jobsDb.deleteJob(db, job.id);
      await jobsDb.audit(db, { jobId: job.id, agentId, action: 'delete', actor });
    });
    return { ok: true, value: { id: job.id } };
  });

/** A job's runs, skipped fires included. */
export function listJobRuns(pool: Pool, agentId: string, jobId: string): Promise<JobResult<jobsDb.RunView[]>> {
  return withJob(pool, agentId, jobId, async () => ({ ok: true, value: await jobsDb.listRuns(pool, jobId) }));
}

/** The Schedule's own next fire, or null (none, or the Schedule is gone). */
export async function nextScheduledFire(client: Client, jobId: string): Promise<Date | null> {
  const described = await client.schedule
    .getHandle(jobScheduleId(jobId))
    .describe()
    .catch(() => undefined);
  return described?.info.nextActionTimes[0] ?? null;
}
