import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { ScheduleNotFoundError, WorkflowNotFoundError } from '@temporalio/client';
import { destinationBook } from '../db/agents';
import { forkOf } from '../db/forks';
import * as jobsDb from '../db/jobs';
import { forkDryRun } from '../domain/evals';
import { TOOL } from '../domain/tool-names';
import type { Pool } from '../db/pool';
import { resolveDestination, type Delivery, type DeliveryOutcome } from '../domain/delivery';
import {
  conversationWorkflowId,
  jobConversationId,
  jobDeliveryEffectKey,
  jobFailedNoticeEffectKey,
  jobScheduleId,
  stuckConversationNoticeEffectKey,
  stuckJobRunNoticeEffectKey,
} from '../domain/ids';
import { nextFire, type ScheduleToolInput } from '../domain/jobs';
import { JOBS, TURN_END_MISSING } from '../domain/job-runs';
import type { SubmitResult } from '../domain/conversation';
import {
  finishedTurnOf,
  submitToConversation,
  wakeConversation,
  waitForTurnEnd,
  type ConversationAddress,
  type FinishedTurn,
} from './conversation';
import { acceptMessage } from './conversation-turn';
import type { JobSettings } from './job-settings';
import { nextScheduledFire } from './jobs';
import { describeProgress, NO_FAILURE_RECORDED, workflowProgress, type WorkflowProgress } from './workflow-state';
import type { TurnResult } from '../contracts/job-run';
import type { Transports } from '../adapters/delivery/transport';
import type { DeliveryReport } from '../domain/delivery';
import { deliverOnce } from './delivery';
import { noticeToOwner } from './owner-notice';
import { scheduleTool, type ToolAnswer } from './schedule-tool';
import { currentStep } from './step';

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

/**
 * Where a job's result goes: its destination as configured now, or the Delivery a person gave it. A target the model
 * chose that is not a destination (a job made by its schedule tool before destinations existed) is refused, as one
 * would be today. A refusal is the delivery outcome.
 */
async function jobTarget(pool: Pool, job: jobsDb.JobRow): Promise<Delivery | DeliveryOutcome> {
  if (job.destination !== null) {
    return (
      resolveDestination(await destinationBook(pool, job.agentId), job.destination) ?? 'dropped:unknown_destination'
    );
  }
  if (job.deliveryChosenBy === 'agent' && job.delivery.channel !== 'none') return 'dropped:unnamed_target';
  return job.delivery;
}

// ---- the run's activities -----------------------------------------------------------------------------------------

/** How long until the job's next fire (null: a one-shot, or a job deleted meanwhile). */
async function untilNextFireMs(pool: Pool, jobId: string): Promise<number | null> {
  const job = await jobsDb.getJobById(pool, jobId);
  const next = job && job.schedule.kind !== 'at' ? nextFire(job.schedule, new Date()) : null;
  return next ? next.getTime() - Date.now() : null;
}

export type BegunRun =
  | { kind: 'run'; job: jobsDb.JobRow; backoffMs: number[]; turnDeadlineMs: number; turnId?: string }
  | { kind: 'skipped'; reason: string };
type RunErrorCount = { errors: number; status: jobsDb.JobStatus | null; untilNextFireMs: number | null };

/** What a job's run learns from its finished turn: the outcome comes from the turn's status, never from its text. */
function turnResult(turn: FinishedTurn): TurnResult {
  if (turn.status === 'replied' || turn.status === 'skipped') return { status: 'ok', text: turn.reply?.text ?? '' };
  if (turn.status === 'budget_exhausted') return { status: 'budget', error: `budget: ${turn.error?.message ?? ''}` };
  return { status: 'error', error: turn.error ? `${turn.error.code}: ${turn.error.message}` : turn.status };
}

/** "15 min", "90 s": how long a run waited, for its booked error. */
function waitedFor(ms: number): string {
  return ms >= 120_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`;
}

interface JobTurnAsk {
  agentId: string;
  jobId: string;
  task: string;
  messageId: string;
}

export type JobRunDeps = {
  pool: Pool;
  transports: Transports;
  jobs: Omit<JobSettings, 'taskQueue'>;
  /** The deployment's idle time of a conversation, for a job conversation this run starts. */
  conversationIdleMs?: number;
};

/** The job's own conversation, as this worker starts its workflow. */
function jobConversation(deps: JobRunDeps, agentId: string, jobId: string): ConversationAddress {
  const taskQueue = Context.current().info.taskQueue;
  return { agentId, conversationId: jobConversationId(jobId), taskQueue, jobId, idleMs: deps.conversationIdleMs };
}

/** The agent's `schedule` tool: the same job functions (and validation) as the API. */
export async function scheduleJobs(
  deps: JobRunDeps,
  /** The conversation whose turn asked (absent in steps recorded before it was passed). */
  input: { agentId: string; request: ScheduleToolInput; conversationKey?: string },
): Promise<ToolAnswer> {
  const { pool } = deps;
  // A fork lists jobs but changes none: a Schedule would act outside it.
  const fork = input.conversationKey && input.request.action !== 'list' && (await forkOf(pool, input.conversationKey));
  const dryRun = fork && forkDryRun(fork, TOOL.schedule);
  if (dryRun) return { text: dryRun, isError: true };
  const ctx = Context.current();
  const settings = { ...deps.jobs, taskQueue: ctx.info.taskQueue };
  return scheduleTool(pool, ctx.client, settings, input.agentId, input.request);
}

/**
 * A fire begins a run and records its task as the message of its first turn (`task`: that message's id), or records
 * itself as skipped: one step where there were two (JOB_RUN_FEWER_STEPS_PATCH).
 */
export async function beginJobRunTurn(
  deps: JobRunDeps,
  input: { runId: string; jobId: string; firedAt: string; task: { messageId: string } },
): Promise<Exclude<BegunRun, { kind: 'run' }> | (Extract<BegunRun, { kind: 'run' }> & { turnId: string })> {
  const begun = await beginJobRun(deps, input);
  if (begun.kind !== 'run') return begun;
  const { job } = begun;
  const ask = { agentId: job.agentId, jobId: job.id, task: job.task, messageId: input.task.messageId };
  return { ...begun, ...(await recordJobTask(deps, ask)) };
}

/** A fire begins a run, or records itself as skipped (the job is not active, or the previous run is busy). */
export async function beginJobRun(
  deps: JobRunDeps,
  input: { runId: string; jobId: string; firedAt: string },
): Promise<BegunRun> {
  const { pool } = deps;
  const client = Context.current().client;
  const firedAt = new Date(input.firedAt);
  for (let tries = 0; ; tries++) {
    const begun = await jobsDb.beginRun(pool, input.runId, input.jobId, firedAt);
    if (begun.kind === 'run') {
      return { ...begun, backoffMs: [...deps.jobs.backoffMs], turnDeadlineMs: deps.jobs.turnDeadlineMs };
    }
    if (begun.kind === 'skipped') {
      // A Schedule whose job is gone is removed, so that it stops firing.
      if (begun.reason === 'the job was deleted') {
        await client.schedule
          .getHandle(jobScheduleId(input.jobId))
          .delete()
          .catch(() => undefined);
      }
      return begun;
    }
    // Busy: skipped, unless the running row belongs to a workflow that is no longer open (terminated outside
    // Keel) or stuck. Temporal unreachable fails this step, to be retried.
    const previous = await workflowProgress(client, begun.runningRunId);
    const stuck = previous.kind === 'failing' && isStuck(previous);
    if (tries > 0 || previous.kind === 'running' || (previous.kind === 'failing' && !stuck)) {
      await jobsDb.skipRun(pool, input.runId, input.jobId, firedAt, 'the previous run was still running');
      return { kind: 'skipped', reason: 'the previous run was still running' };
    }
    if (previous.kind === 'failing') await endStuckRun(deps, begun.runningRunId, input.jobId, previous);
    else await jobsDb.abandonRun(pool, begun.runningRunId);
  }
}

/** A run's workflow task failed again and again, with a failure recorded: not a worker lost once mid-task. */
function isStuck(p: Extract<WorkflowProgress, { kind: 'failing' }>): boolean {
  return p.attempt >= JOBS.stuckRunAttempts && p.message !== NO_FAILURE_RECORDED;
}

/**
 * A run whose workflow cannot go on is terminated and booked as an error that says why, and the agent's owner hears
 * of it once. Its turn, if it began one, is left as it stood: the next run's turn does not wait for it.
 */
async function endStuckRun(
  deps: JobRunDeps,
  runId: string,
  jobId: string,
  progress: Extract<WorkflowProgress, { kind: 'failing' }>,
): Promise<void> {
  const { pool, transports } = deps;
  const error = `the run was ended: its ${describeProgress(progress)}: ${progress.message}`;
  await Context.current()
    .client.workflow.getHandle(runId)
    .terminate(error.slice(0, 200))
    .catch((err: unknown) => {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    });
  await jobsDb.abandonRun(pool, runId, error);
  const job = await jobsDb.getJobById(pool, jobId);
  if (!job) return;
  await noticeToOwner(
    pool,
    transports,
    {
      agentId: job.agentId,
      effectKey: stuckJobRunNoticeEffectKey(runId),
      text: `A run of scheduled job "${job.name}" was stuck and has been ended: ${error}. The job runs on.`,
    },
    currentStep(),
  );
}

/**
 * The task as a turn of the job's own conversation (idempotent by messageId). The conversation signals `notify`,
 * the run's workflow, once the turn's end is committed.
 */
export async function askForJobTurn(deps: JobRunDeps, input: JobTurnAsk & { notify: string }): Promise<SubmitResult> {
  const ctx = Context.current();
  const { agentId, jobId, messageId, notify } = input;
  return submitToConversation({ client: ctx.client, pool: deps.pool }, jobConversation(deps, agentId, jobId), {
    messageId,
    text: input.task,
    mode: 'queue',
    notify,
  });
}

/**
 * The task as the message of a turn of the job's conversation, recorded once per messageId: the run runs the turn
 * itself (JOB_TURN_IN_RUN_PATCH). A retried step answers the turn it recorded.
 */
export async function recordJobTask(deps: JobRunDeps, input: JobTurnAsk): Promise<{ turnId: string }> {
  const { agentId, jobId, messageId } = input;
  const conversationId = jobConversationId(jobId);
  const conversationKey = conversationWorkflowId(agentId, conversationId);
  const message = { messageId, text: input.task, mode: 'queue' as const };
  const accepted = await acceptMessage(
    { pool: deps.pool },
    { conversationKey, agentId, conversationId, message, turnId: randomUUID(), startsTurn: true },
  );
  return { turnId: accepted.turnId };
}

/**
 * Delegates a run's turn spawned report to the job's conversation: its workflow is started, if none runs, to admit
 * their outcomes and relay them, as it does for any conversation.
 */
export async function handOverJobDelegates(deps: JobRunDeps, input: { agentId: string; jobId: string }): Promise<void> {
  const ctx = Context.current();
  const { agentId, jobId } = input;
  await wakeConversation(ctx.client, jobConversation(deps, agentId, jobId));
}

/** The job's turn as it ended, or null while it has not. */
export async function jobTurnResult(deps: JobRunDeps, input: JobTurnAsk): Promise<TurnResult | null> {
  const { pool } = deps;
  const key = conversationWorkflowId(input.agentId, jobConversationId(input.jobId));
  const turn = await finishedTurnOf(pool, key, input.messageId);
  return turn ? turnResult(turn) : null;
}

/**
 * The job's turn as it ended and, when it answered with text, that text delivered: one step where there were two
 * (JOB_RUN_FEWER_STEPS_PATCH). The read is idempotent and the delivery goes through the effects ledger, so a retried
 * step delivers once.
 */
export async function deliverJobTurn(
  deps: JobRunDeps,
  input: JobTurnAsk & { runId: string; target: Delivery },
): Promise<TurnResult & { sent?: DeliveryReport }> {
  const turn = (await jobTurnResult(deps, input)) ?? { status: 'error', error: TURN_END_MISSING };
  if (turn.status !== 'ok' || !turn.text) return turn;
  const { runId, agentId, jobId, target } = input;
  return { ...turn, sent: await deliverJobResult(deps, { runId, agentId, jobId, target, text: turn.text }) };
}

/**
 * A run whose turn did not end within its deadline: why (from the conversation's workflow), told once per
 * conversation run to the agent's owner. Answers the error the run books.
 */
export async function reportStuckJobTurn(
  deps: JobRunDeps,
  input: JobTurnAsk & { waitedMs: number },
): Promise<{ error: string }> {
  const { pool, transports } = deps;
  const conversationKey = conversationWorkflowId(input.agentId, jobConversationId(input.jobId));
  const progress = await workflowProgress(Context.current().client, conversationKey);
  const error = `turn did not finish in ${waitedFor(input.waitedMs)}: ${describeProgress(progress)}`;
  if (progress.kind === 'failing') {
    await noticeToOwner(
      pool,
      transports,
      {
        agentId: input.agentId,
        effectKey: stuckConversationNoticeEffectKey(conversationKey, progress.runId),
        text:
          `The conversation of scheduled job ${input.jobId} is stuck: its ${describeProgress(progress)}: ` +
          `${progress.message}. Its runs are booked as errors until it is reset (docs/operators.md).`,
      },
      currentStep(),
    );
  }
  return { error };
}

/**
 * Only for runs begun before JOB_TURN_SIGNAL_PATCH (workflows/job-run.ts): the turn submitted, then awaited in
 * this activity, reading PostgreSQL every second while heartbeating. Newer runs hold no activity meanwhile.
 */
export async function runJobTurn(deps: JobRunDeps, input: JobTurnAsk): Promise<TurnResult> {
  const { pool } = deps;
  const ctx = Context.current();
  const { agentId, jobId, messageId } = input;
  const conversationId = jobConversationId(jobId);
  const to = jobConversation(deps, agentId, jobId);
  await submitToConversation({ client: ctx.client, pool }, to, { messageId, text: input.task, mode: 'queue' });
  const turn = await waitForTurnEnd(pool, conversationWorkflowId(agentId, conversationId), messageId, {
    pollMs: 1000,
    sleep: (ms) => {
      ctx.heartbeat();
      return ctx.sleep(ms);
    },
  });
  return turnResult(turn);
}

/** Counts a failed attempt; answers what the workflow needs to decide (and keeps schedules math out of it). */
export async function recordJobRunError(
  deps: JobRunDeps,
  input: {
    runId: string;
    jobId: string;
    attempt: number;
    error: string;
  },
): Promise<RunErrorCount> {
  const { pool } = deps;
  const { errors, status } = await jobsDb.recordRunError(pool, input.runId, input.jobId, input.attempt, input.error);
  return { errors, status, untilNextFireMs: await untilNextFireMs(pool, input.jobId) };
}

/**
 * A run a budget stopped starts (reason) or stops (null) waiting for the agent's budgets to change. Answers how
 * long it may wait: until the job's next fire, which takes over then (null: none comes, it waits until told), or
 * 0 when the job is no longer active (paused or deleted: nothing waits for it).
 */
export async function markJobRunBudgetBlocked(
  deps: JobRunDeps,
  input: {
    runId: string;
    jobId: string;
    reason: string | null;
  },
): Promise<{ untilNextFireMs: number | null }> {
  const { pool } = deps;
  const job = await jobsDb.getJobById(pool, input.jobId);
  if (input.reason !== null && job?.status !== 'active') return { untilNextFireMs: 0 };
  await jobsDb.markRunBudgetBlocked(pool, input.runId, input.reason);
  return { untilNextFireMs: await untilNextFireMs(pool, input.jobId) };
}

/**
 * The job's result to the job's own delivery target, through the effects ledger. A named destination is looked up
 * now, as a person has it configured; `target` (the job's Delivery when its run began) serves a job deleted since.
 */
export async function deliverJobResult(
  deps: JobRunDeps,
  input: {
    runId: string;
    agentId: string;
    jobId: string;
    target: Delivery;
    text: string;
  },
  /** The job as this step read it, moments before: not read again. */
  read?: jobsDb.JobRow,
): Promise<DeliveryReport> {
  const { pool, transports } = deps;
  const key = jobDeliveryEffectKey(input.runId);
  const conversationId = jobConversationId(input.jobId);
  const job = read ?? (await jobsDb.getJobById(pool, input.jobId));
  const target = job ? await jobTarget(pool, job) : input.target;
  if (typeof target === 'string') return { outcome: target, attempts: 0 };
  return deliverOnce(pool, transports, {
    effectKey: key,
    conversationKey: null,
    turnId: null,
    target,
    message: { agentId: input.agentId, conversationId, turnId: null, text: input.text, idempotencyKey: key },
    ...currentStep(),
  });
}

export async function bookJobRun(
  deps: JobRunDeps,
  booking: Omit<jobsDb.RunBooking, 'nextRunAt'> & { deleteJob: boolean },
): Promise<void> {
  const { pool } = deps;
  const client = Context.current().client;
  // The next run as the Schedule will fire it (its own phase), not as computed here.
  const nextRunAt = booking.completes || booking.fails ? null : await nextScheduledFire(client, booking.jobId);
  await jobsDb.bookRun(pool, { ...booking, nextRunAt });
  if (booking.deleteJob) {
    await client.schedule
      .getHandle(jobScheduleId(booking.jobId))
      .delete()
      .catch(() => undefined);
    await jobsDb.deleteJob(pool, booking.jobId);
  }
}

/**
 * A job that failed for good (too many errors in a row, or a self-deleting job whose result was not delivered):
 * its Schedule is paused and its owner hears of it through the owner delivery.
 */
export async function failJob(deps: JobRunDeps, input: FailJobInput): Promise<DeliveryReport> {
  const { pool, transports } = deps;
  const why = input.undelivered
    ? `its result could not be delivered (${input.undelivered})`
    : `failed after ${input.errors} consecutive errors`;
  await Context.current()
    .client.schedule.getHandle(jobScheduleId(input.jobId))
    .pause(why)
    .catch((err: unknown) => {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    });
  return noticeToOwner(
    pool,
    transports,
    {
      agentId: input.agentId,
      effectKey: jobFailedNoticeEffectKey(input.jobId, input.runId),
      text: input.undelivered
        ? `Scheduled job "${input.name}" ran, but its result could not be delivered (${input.undelivered}); ` +
          'the job has been kept as failed, with its run.'
        : `Scheduled job "${input.name}" failed ${input.errors} times in a row and has been stopped. ` +
          `Last error: ${input.error}`,
    },
    currentStep(),
  );
}
