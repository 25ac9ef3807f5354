import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { Context } from '@temporalio/activity';
import { isGrpcServiceError, ScheduleNotFoundError, ScheduleOverlapPolicy, ServiceError, WithStartWorkflowOperation, WorkflowNotFoundError, type Client, type ScheduleOptions, type ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import { MONTHS } from '@temporalio/client';
import { getAgent } from '../db/agents';
import { getTurn, turnOfMessage } from '../db/conversations';
import * as jobsDb from '../db/jobs';
import { inTransaction, type Pool } from '../db/pool';
import { NO_DELIVERY, type Delivery, type DeliveryOutcome } from '../domain/delivery';
import { conversationWorkflowId } from '../domain/ids';
import { JOBS, NewJob, nextFire, validateNewJob, type JobRuleError, type JobSchedule } from '../domain/jobs';
import { isFinished } from '../domain/conversation';
import { SA } from '../domain/search-attributes';
import type { conversationWorkflow } from '../workflows/conversation';
import { submitMessage } from '../workflows/conversation';
import type { jobRunWorkflow } from '../workflows/job-run';
import { deliverOnce, type DeliveryReport, type Transports } from './delivery/deliver-reply';

/** The scheduling settings of a Keel deployment. */
export interface JobSettings {
  taskQueue: string;
  everyFloorMs: number;
  catchupWindowMs: number;
  /** Retry delays of a failed run (tests shorten them). */
  backoffMs: readonly number[];
}

export const DEFAULT_JOB_SETTINGS: Omit<JobSettings, 'taskQueue'> = { everyFloorMs: JOBS.defaultEveryFloorMs, catchupWindowMs: JOBS.defaultCatchupWindowMs, backoffMs: JOBS.backoffMs };

export const jobScheduleId = (jobId: string) => `job:${jobId}`;
/** The conversation a job's runs are turns of. */
export const jobConversationId = (jobId: string) => `sched:${jobId}`;

export interface FailJobInput {
  runId: string;
  jobId: string;
  agentId: string;
  name: string;
  error: string;
  errors: number;
  /** Set when the run succeeded but its result was not delivered (a self-deleting job is kept, failed). */
  undelivered?: DeliveryOutcome;
}

export type JobResult<T> = { ok: true; value: T } | { ok: false; error: JobRuleError | { code: 'not_found' | 'not_active' | 'not_paused'; message: string; status: 404 | 409 } };

/** The Temporal Schedule of a job: its fires start run workflows; overlap is left to the run (it records skips). */
function scheduleOptions(job: jobsDb.JobRow, s: JobSettings): ScheduleOptions<ScheduleOptionsStartWorkflowAction<typeof jobRunWorkflow>> {
  return {
    scheduleId: jobScheduleId(job.id),
    spec: specOf(job.schedule),
    action: {
      type: 'startWorkflow',
      workflowType: 'jobRunWorkflow',
      workflowId: jobScheduleId(job.id),
      taskQueue: s.taskQueue,
      args: [{ jobId: job.id }],
      typedSearchAttributes: [
        { key: SA.agentId, value: job.agentId },
        { key: SA.jobId, value: job.id },
        { key: SA.kind, value: 'job' },
      ],
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
      return {
        calendars: [
          { year: at.getUTCFullYear(), month: MONTHS[at.getUTCMonth()]!, dayOfMonth: at.getUTCDate(), hour: at.getUTCHours(), minute: at.getUTCMinutes(), second: at.getUTCSeconds() },
        ],
        timezone: 'UTC',
      };
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
export async function createJob(pool: Pool, client: Client, s: JobSettings, agentId: string, input: NewJob, createdBy: 'agent' | 'user'): Promise<JobResult<jobsDb.JobRow>> {
  const id = randomUUID();
  try {
    return await inTransaction(pool, async (db) => {
      await db.query('INSERT INTO agents (id, name) VALUES ($1, $1) ON CONFLICT (id) DO NOTHING', [agentId]);
      await db.query('SELECT 1 FROM agents WHERE id = $1 FOR UPDATE', [agentId]);
      const verdict = validateNewJob(input, {
        now: new Date(),
        existingJobs: await jobsDb.jobCount(db, agentId),
        nameTaken: await jobsDb.jobNameTaken(db, agentId, input.name),
        everyFloorMs: s.everyFloorMs,
      });
      if (!verdict.ok) return { ok: false, error: verdict.error };
      const job = await jobsDb.insertJob(db, {
        id,
        agentId,
        name: input.name,
        description: input.description,
        schedule: verdict.schedule,
        task: input.task,
        delivery: input.delivery ?? NO_DELIVERY,
        // A one-shot the agent made removes itself after its run, by default.
        deleteAfterRun: input.deleteAfterRun ?? (createdBy === 'agent' && verdict.schedule.kind === 'at'),
        createdBy,
        nextRunAt: verdict.nextRunAt,
      });
      await jobsDb.audit(db, { jobId: id, agentId, action: 'create', actor: createdBy, detail: { name: job.name, schedule: job.schedule } });
      await client.schedule.create(scheduleOptions(job, s));
      return { ok: true, value: job };
    });
  } catch (err) {
    // The row rolled back; a Schedule that may have been created (even by a call that timed out) is removed too.
    await client.schedule.getHandle(jobScheduleId(id)).delete().catch(() => undefined);
    if (err instanceof ServiceError && isGrpcServiceError(err.cause) && err.cause.code === status.INVALID_ARGUMENT) {
      return { ok: false, error: { code: 'invalid_schedule', field: 'schedule', message: `Temporal refused the schedule: ${err.cause.details}`, status: 400 } };
    }
    throw err;
  }
}

async function withJob<T>(pool: Pool, agentId: string, jobId: string, fn: (job: jobsDb.JobRow) => Promise<JobResult<T>>): Promise<JobResult<T>> {
  const job = await jobsDb.getJob(pool, agentId, jobId);
  if (!job) return { ok: false, error: { code: 'not_found', message: `job ${jobId} not found`, status: 404 } };
  return fn(job);
}

const refused = (code: 'not_active' | 'not_paused', message: string): JobResult<never> => ({ ok: false, error: { code, message, status: 409 } });

/** Pause acts on the row and the Schedule together; a run under way finishes but leaves the job paused. */
export function pauseJob(pool: Pool, client: Client, agentId: string, jobId: string, actor: string): Promise<JobResult<jobsDb.JobRow>> {
  return withJob(pool, agentId, jobId, async (job) => {
    if (job.status !== 'active') return refused('not_active', `job ${job.name} is ${job.status}, not active`);
    // The Schedule first: if it cannot be paused, the row still says what is true.
    await client.schedule.getHandle(jobScheduleId(job.id)).pause(`paused by ${actor}`);
    if (!(await jobsDb.moveJob(pool, job.id, 'active', 'paused'))) return refused('not_active', `job ${job.name} changed meanwhile`);
    await jobsDb.audit(pool, { jobId: job.id, agentId, action: 'pause', actor });
    return { ok: true, value: (await jobsDb.getJob(pool, agentId, jobId))! };
  });
}

/** Resume recomputes the next run and resets the error count. */
export function resumeJob(pool: Pool, client: Client, agentId: string, jobId: string, actor: string): Promise<JobResult<jobsDb.JobRow>> {
  return withJob(pool, agentId, jobId, async (job) => {
    if (job.status !== 'paused') return refused('not_paused', `job ${job.name} is ${job.status}, not paused`);
    const next = nextFire(job.schedule, new Date());
    if (!next) return refused('not_paused', `job ${job.name} has no future fire left (a one-shot whose time has passed)`);
    await client.schedule.getHandle(jobScheduleId(job.id)).unpause(`resumed by ${actor}`);
    if (!(await jobsDb.moveJob(pool, job.id, 'paused', 'active', { nextRunAt: (await nextScheduledFire(client, job.id)) ?? next, resetErrors: true }))) {
      return refused('not_paused', `job ${job.name} changed meanwhile`);
    }
    await jobsDb.audit(pool, { jobId: job.id, agentId, action: 'resume', actor });
    return { ok: true, value: (await jobsDb.getJob(pool, agentId, jobId))! };
  });
}

/** Run now: only an active job (409 otherwise); the fire goes through the Schedule like any other. */
export function runJobNow(client: Client, pool: Pool, agentId: string, jobId: string, actor: string): Promise<JobResult<jobsDb.JobRow>> {
  return withJob(pool, agentId, jobId, async (job) => {
    if (job.status !== 'active') return refused('not_active', `job ${job.name} is ${job.status}, not active`);
    await client.schedule.getHandle(jobScheduleId(job.id)).trigger(ScheduleOverlapPolicy.ALLOW_ALL);
    await jobsDb.audit(pool, { jobId: job.id, agentId, action: 'run', actor });
    return { ok: true, value: job };
  });
}

export function deleteJob(client: Client, pool: Pool, agentId: string, jobId: string, actor: string): Promise<JobResult<{ id: string }>> {
  return withJob(pool, agentId, jobId, async (job) => {
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
}

/** The Schedule's own next fire, or null (none, or the Schedule is gone). */
async function nextScheduledFire(client: Client, jobId: string): Promise<Date | null> {
  const described = await client.schedule
    .getHandle(jobScheduleId(jobId))
    .describe()
    .catch(() => undefined);
  return described?.info.nextActionTimes[0] ?? null;
}

// ---- the agent's `schedule` tool ----------------------------------------------------------------------------------

export interface ScheduleToolInput {
  action: 'create' | 'list' | 'delete' | 'run' | 'pause' | 'resume';
  jobId?: string;
  name?: string;
  description?: string;
  schedule?: JobSchedule;
  task?: string;
  delivery?: Delivery;
  deleteAfterRun?: boolean;
}

const describeJob = (j: jobsDb.JobRow) => `${j.name} (id ${j.id}, ${j.status}, next run ${j.nextRunAt ?? 'none'})`;

/** The tool's answer for the model, in words; rule errors name the field and the rule, as the API does. */
async function scheduleToolAction(pool: Pool, client: Client, s: JobSettings, agentId: string, input: ScheduleToolInput): Promise<{ text: string; isError: boolean }> {
  const answer = <T>(r: JobResult<T>, ok: (v: T) => string) => (r.ok ? { text: ok(r.value), isError: false } : { text: r.error.message, isError: true });
  if (input.action === 'list') {
    const jobs = await jobsDb.listJobs(pool, agentId);
    return { text: jobs.length ? jobs.map(describeJob).join('\n') : 'no scheduled jobs', isError: false };
  }
  if (input.action === 'create') {
    const parsed = NewJob.safeParse({ name: input.name, description: input.description, schedule: input.schedule, task: input.task, delivery: input.delivery, deleteAfterRun: input.deleteAfterRun });
    if (!parsed.success) return { text: `cannot create the job: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`, isError: true };
    return answer(await createJob(pool, client, s, agentId, parsed.data, 'agent'), (j) => `created job ${describeJob(j)}`);
  }
  const job = input.jobId ? await jobsDb.getJob(pool, agentId, input.jobId) : input.name ? await jobsDb.findJobByName(pool, agentId, input.name) : undefined;
  if (!job) return { text: `no job ${input.jobId ?? input.name ?? '(give jobId or name)'}`, isError: true };
  switch (input.action) {
    case 'delete':
      return answer(await deleteJob(client, pool, agentId, job.id, 'agent'), () => `deleted job ${job.name}`);
    case 'run':
      return answer(await runJobNow(client, pool, agentId, job.id, 'agent'), () => `job ${job.name} started; its result goes to its delivery`);
    case 'pause':
      return answer(await pauseJob(pool, client, agentId, job.id, 'agent'), (j) => `paused ${describeJob(j)}`);
    case 'resume':
      return answer(await resumeJob(pool, client, agentId, job.id, 'agent'), (j) => `resumed ${describeJob(j)}`);
  }
}

// ---- the run's activities -----------------------------------------------------------------------------------------

export type TurnResult = { status: 'ok'; text: string } | { status: 'error'; error: string };

export function jobRunActivities(deps: { pool: Pool; transports: Transports; jobs: Omit<JobSettings, 'taskQueue'> }) {
  const { pool, transports } = deps;
  return {
    /** The agent's `schedule` tool: the same job functions (and validation) as the API. */
    scheduleJobs: async (input: { agentId: string; request: ScheduleToolInput }): Promise<{ text: string; isError: boolean }> => {
      const ctx = Context.current();
      return scheduleToolAction(pool, ctx.client, { ...deps.jobs, taskQueue: ctx.info.taskQueue }, input.agentId, input.request);
    },

    /** A fire begins a run, or records itself as skipped (the job is not active, or the previous run is busy). */
    beginJobRun: async (input: { runId: string; jobId: string; firedAt: string }): Promise<{ kind: 'run'; job: jobsDb.JobRow; backoffMs: number[] } | { kind: 'skipped'; reason: string }> => {
      const client = Context.current().client;
      const firedAt = new Date(input.firedAt);
      for (let tries = 0; ; tries++) {
        const begun = await jobsDb.beginRun(pool, input.runId, input.jobId, firedAt);
        if (begun.kind === 'run') return { ...begun, backoffMs: [...deps.jobs.backoffMs] };
        if (begun.kind === 'skipped') {
          // A Schedule whose job is gone is removed, so that it stops firing.
          if (begun.reason === 'the job was deleted') await client.schedule.getHandle(jobScheduleId(input.jobId)).delete().catch(() => undefined);
          return begun;
        }
        // Busy: skipped, unless the running row belongs to a workflow that is no longer open (terminated outside Keel).
        const open = await client.workflow
          .getHandle(begun.runningRunId)
          .describe()
          .then((d) => d.status.name === 'RUNNING')
          // Only a workflow Temporal does not know is closed; Temporal unreachable fails this step, to be retried.
          .catch((err: unknown) => {
            if (err instanceof WorkflowNotFoundError) return false;
            throw err;
          });
        if (open || tries > 0) {
          await jobsDb.skipRun(pool, input.runId, input.jobId, firedAt, 'the previous run was still running');
          return { kind: 'skipped', reason: 'the previous run was still running' };
        }
        await jobsDb.abandonRun(pool, begun.runningRunId);
      }
    },

    /**
     * The task as a turn of the conversation `sched:<jobId>`: submitted through the conversation workflow
     * (idempotent by messageId), then awaited. The outcome comes from the turn's status, never from its text.
     */
    runJobTurn: async (input: { agentId: string; jobId: string; task: string; messageId: string }): Promise<TurnResult> => {
      const ctx = Context.current();
      const conversationId = jobConversationId(input.jobId);
      const key = conversationWorkflowId(input.agentId, conversationId);
      const start = new WithStartWorkflowOperation<typeof conversationWorkflow>('conversationWorkflow', {
        workflowId: key,
        taskQueue: ctx.info.taskQueue,
        args: [{ agentId: input.agentId, conversationId }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: [
          { key: SA.agentId, value: input.agentId },
          { key: SA.conversationId, value: conversationId },
          { key: SA.kind, value: 'conversation' },
          { key: SA.jobId, value: input.jobId },
        ],
      });
      await ctx.client.workflow.executeUpdateWithStart(submitMessage, {
        args: [{ messageId: input.messageId, text: input.task, mode: 'queue' }],
        updateId: `msg:${input.messageId}`,
        startWorkflowOperation: start,
      });
      for (;;) {
        const turnId = await turnOfMessage(pool, key, input.messageId);
        const turn = turnId ? await getTurn(pool, key, turnId) : undefined;
        if (turn && isFinished(turn)) {
          if (turn.status === 'replied' || turn.status === 'skipped') return { status: 'ok', text: turn.reply?.text ?? '' };
          return { status: 'error', error: turn.error ? `${turn.error.code}: ${turn.error.message}` : turn.status };
        }
        ctx.heartbeat();
        await ctx.sleep(200);
      }
    },

    /** Counts a failed attempt; answers what the workflow needs to decide (and keeps schedules math out of it). */
    recordJobRunError: async (input: { runId: string; jobId: string; attempt: number; error: string }): Promise<{ errors: number; status: jobsDb.JobStatus | null; untilNextFireMs: number | null }> => {
      const { errors, status } = await jobsDb.recordRunError(pool, input.runId, input.jobId, input.attempt, input.error);
      const job = await jobsDb.getJobById(pool, input.jobId);
      const next = job && job.schedule.kind !== 'at' ? nextFire(job.schedule, new Date()) : null;
      return { errors, status, untilNextFireMs: next ? next.getTime() - Date.now() : null };
    },

    /** The job's result to the job's own delivery target, through the effects ledger. */
    deliverJobResult: async (input: { runId: string; agentId: string; jobId: string; target: Delivery; text: string }): Promise<DeliveryReport> =>
      deliverOnce(pool, transports, {
        effectKey: `${input.runId}/delivery`,
        conversationKey: null,
        turnId: null,
        target: input.target,
        message: { agentId: input.agentId, conversationId: jobConversationId(input.jobId), turnId: null, text: input.text, idempotencyKey: `${input.runId}/delivery` },
      }),

    bookJobRun: async (booking: Omit<jobsDb.RunBooking, 'nextRunAt'> & { deleteJob: boolean }): Promise<void> => {
      // The next run as the Schedule will fire it (its own phase), not as computed here.
      const nextRunAt = booking.completes || booking.fails ? null : await nextScheduledFire(Context.current().client, booking.jobId);
      await inTransaction(pool, async (db) => {
        await jobsDb.bookRun(db, { ...booking, nextRunAt });
        const job = await jobsDb.getJobById(db, booking.jobId);
        if (job && booking.fails) await jobsDb.audit(db, { jobId: job.id, agentId: job.agentId, action: 'fail', actor: 'scheduler', detail: { error: booking.error } });
        // Delete-after-run: only now, with the delivery outcome recorded in the same write.
        if (job && booking.deleteJob) await jobsDb.audit(db, { jobId: job.id, agentId: job.agentId, action: 'delete-after-run', actor: 'scheduler' });
      });
      if (booking.deleteJob) {
        await Context.current().client.schedule.getHandle(jobScheduleId(booking.jobId)).delete().catch(() => undefined);
        await jobsDb.deleteJob(pool, booking.jobId);
      }
    },

    /**
     * A job that failed for good (too many errors in a row, or a self-deleting job whose result was not delivered):
     * its Schedule is paused and its owner hears of it through the owner delivery.
     */
    failJob: async (input: FailJobInput): Promise<DeliveryReport> => {
      const why = input.undelivered
        ? `its result could not be delivered (${input.undelivered})`
        : `failed after ${input.errors} consecutive errors`;
      await Context.current()
        .client.schedule.getHandle(jobScheduleId(input.jobId))
        .pause(why)
        .catch((err: unknown) => {
          if (!(err instanceof ScheduleNotFoundError)) throw err;
        });
      const owner = (await getAgent(pool, input.agentId))?.ownerDelivery;
      if (!owner) return { outcome: 'skipped:no_owner_delivery', attempts: 0 };
      const key = `job:${input.jobId}/failed-notice/${input.runId}`;
      return deliverOnce(pool, transports, {
        effectKey: key,
        conversationKey: null,
        turnId: null,
        target: owner,
        message: {
          agentId: input.agentId,
          conversationId: null,
          turnId: null,
          text: input.undelivered
            ? `Scheduled job "${input.name}" ran, but its result could not be delivered (${input.undelivered}); ` +
              'the job has been kept as failed, with its run.'
            : `Scheduled job "${input.name}" failed ${input.errors} times in a row and has been stopped. ` +
              `Last error: ${input.error}`,
          idempotencyKey: key,
        },
      });
    },
  };
}
