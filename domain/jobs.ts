import { z } from 'zod';
import { canonicalTimeZone, cronRefusal, parseCron } from './cron';
import {
  Delivery,
  DestinationName,
  MODEL_TARGET_REFUSED,
  resolveDestination,
  unknownDestination,
  type DestinationBook,
} from './delivery';
import { utf8Bytes } from './messages';
import { dateTime, instantOf, storableString } from './text';
import { BudgetUsd } from './spend';
import { JOBS } from './job-runs';
export { afterDelivery, failsAfterErrors, JOBS, retryDelayMs } from './job-runs';

const scheduleWith = <At extends z.ZodType<string, unknown>>(at: At) =>
  z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('at'), at }).strict(),
    z.object({ kind: z.literal('every'), intervalMs: z.number() }).strict(),
    z.object({ kind: z.literal('cron'), expr: z.string(), tz: z.string().optional() }).strict(),
  ]);
/** A schedule as a job keeps it, and as the agent's `schedule` tool describes it to the model. */
export const JobSchedule = scheduleWith(z.string());
export type JobSchedule = z.infer<typeof JobSchedule>;

/** The shape of a new job, from the API or the agent's `schedule` tool; the rules are in `validateNewJob`. */
export const NewJob = z
  .object({
    name: storableString(),
    description: storableString().optional(),
    /** An `at` is a date-time (RFC 3339, any offset), given on in UTC; validateNewJob checks the rest. */
    schedule: scheduleWith(dateTime()),
    task: storableString(),
    /** A Delivery (from a person, through the API) or the name of one of the agent's destinations. */
    delivery: z.union([Delivery, DestinationName]).optional(),
    deleteAfterRun: z.boolean().optional(),
    /** The job's own budget for each run, in USD, instead of the agent's perJobRunUsd (docs/spend.md). */
    budgetUsd: BudgetUsd.optional(),
  })
  .strict();
export type NewJob = z.infer<typeof NewJob>;

export type JobRuleCode =
  | 'job_limit'
  | 'task_too_large'
  | 'job_name_taken'
  | 'invalid_schedule'
  | 'invalid_request'
  | 'unknown_destination'
  | 'target_not_allowed';

/** A broken rule: the field it concerns, the rule in words, and the API status it maps to. */
export interface JobRuleError {
  code: JobRuleCode;
  field: string;
  message: string;
  status: 400 | 409 | 413 | 429;
}

export interface JobContext {
  now: Date;
  /** Jobs the agent already has, in any status. */
  existingJobs: number;
  /** Whether another job of the agent has this name, ignoring case. */
  nameTaken: boolean;
  everyFloorMs?: number;
  /**
   * Who chose the job's delivery: a person (the API) may give a Delivery, the model (`agent`) only a name. Unset
   * counts as the model, the stricter of the two.
   */
  chosenBy?: 'agent' | 'user';
  /** The agent's destinations, which a name must be one of (none when unset). */
  destinations?: DestinationBook;
}

const NO_DESTINATIONS: DestinationBook = { destinations: {}, ownerDelivery: null };

export type JobVerdict = { ok: true; nextRunAt: Date; schedule: JobSchedule } | { ok: false; error: JobRuleError };

const fail = (code: JobRuleCode, field: string, message: string, status: JobRuleError['status']): JobVerdict => ({
  ok: false,
  error: { code, field, message, status },
});

/**
 * The one validation of a job, used by the API and by the agent's tool alike. Rules in Phantom's order: the job
 * limit, the task size, the name, the schedule, the delivery target (its shape checked by the schema; here who may
 * give what, and that a name is one of the agent's destinations).
 */
export function validateNewJob(job: NewJob, ctx: JobContext): JobVerdict {
  if (ctx.existingJobs >= JOBS.maxJobsPerAgent)
    return fail('job_limit', 'agent', `an agent may have at most ${JOBS.maxJobsPerAgent} jobs`, 429);
  if (utf8Bytes(job.task) > JOBS.taskBytes)
    return fail('task_too_large', 'task', `task must be at most ${JOBS.taskBytes} UTF-8 bytes`, 413);
  if (!job.task.trim()) return fail('invalid_request', 'task', 'task must not be empty', 400);
  const name = job.name.trim();
  if (name.length < 1 || name.length > JOBS.nameChars)
    return fail('invalid_request', 'name', `name must be 1–${JOBS.nameChars} characters`, 400);
  if ((job.description ?? '').length > JOBS.descriptionChars)
    return fail(
      'invalid_request',
      'description',
      `description must be at most ${JOBS.descriptionChars} characters`,
      400,
    );
  if (ctx.nameTaken)
    return fail('job_name_taken', 'name', `a job named "${name}" already exists (names are unique ignoring case)`, 409);
  const schedule = checkSchedule(job.schedule, ctx.now, ctx.everyFloorMs ?? JOBS.defaultEveryFloorMs);
  if ('error' in schedule) return fail('invalid_schedule', schedule.field, schedule.error, 400);
  const target = job.delivery;
  const book = ctx.destinations ?? NO_DESTINATIONS;
  if (typeof target === 'object' && (ctx.chosenBy ?? 'agent') === 'agent')
    return fail('target_not_allowed', 'delivery', MODEL_TARGET_REFUSED, 400);
  if (typeof target === 'string' && !resolveDestination(book, target))
    return fail('unknown_destination', 'delivery', unknownDestination(book, target), 400);
  return { ok: true, nextRunAt: schedule.next, schedule: schedule.normalized };
}

function checkSchedule(
  s: JobSchedule,
  now: Date,
  floorMs: number,
): { next: Date; normalized: JobSchedule } | { field: string; error: string } {
  switch (s.kind) {
    case 'at': {
      // An RFC 3339 date-time, or NewJob's UTC text of one; a date that does not exist (February 30) is neither.
      const at = instantOf(s.at);
      if (!at)
        return { field: 'schedule.at', error: 'at must be an ISO-8601 time with a zone (e.g. 2027-01-01T09:00:00Z)' };
      if (at.getUTCFullYear() > MAX_YEAR)
        return { field: 'schedule.at', error: `at must be before the year ${MAX_YEAR + 1}` };
      if (at.getTime() <= now.getTime()) return { field: 'schedule.at', error: 'at must be strictly in the future' };
      return { next: at, normalized: { kind: 'at', at: at.toISOString() } };
    }
    case 'every':
      if (!Number.isInteger(s.intervalMs) || s.intervalMs <= 0)
        return { field: 'schedule.intervalMs', error: 'intervalMs must be a positive whole number of milliseconds' };
      if (s.intervalMs < floorMs)
        return { field: 'schedule.intervalMs', error: `intervalMs must be at least ${floorMs} ms` };
      if (s.intervalMs > MAX_INTERVAL_MS)
        return { field: 'schedule.intervalMs', error: `intervalMs must be at most ${MAX_INTERVAL_MS} ms (10 years)` };
      return { next: new Date(now.getTime() + s.intervalMs), normalized: s };
    case 'cron': {
      const tz = canonicalTimeZone(s.tz ?? 'UTC');
      if (!tz) return { field: 'schedule.tz', error: `"${s.tz}" is not an IANA time zone` };
      const expr = s.expr.trim();
      const refusal = cronRefusal(expr);
      if (refusal) return { field: 'schedule.expr', error: refusal };
      let next: Date | null;
      try {
        next = parseCron(expr, tz).nextRun(now);
      } catch (err) {
        return {
          field: 'schedule.expr',
          error: `cron does not parse: ${err instanceof Error ? err.message : String(err)}`,
        };
      }
      if (!next) return { field: 'schedule.expr', error: 'cron has no future fire' };
      return { next, normalized: { kind: 'cron', expr, tz } };
    }
  }
}

/** Temporal's calendar reaches this far; an interval longer than this is surely a mistake. */
const MAX_YEAR = 2100;
const MAX_INTERVAL_MS = 10 * 365 * 24 * 3_600_000;

/** The next fire of a schedule after `after` (null when there is none: a past one-shot, a cron with no future). */
export function nextFire(s: JobSchedule, after: Date): Date | null {
  switch (s.kind) {
    case 'at':
      return new Date(s.at) > after ? new Date(s.at) : null;
    case 'every':
      return new Date(after.getTime() + s.intervalMs);
    case 'cron':
      return parseCron(s.expr, s.tz ?? 'UTC').nextRun(after);
  }
}

/** What the agent's `schedule` tool is called with. */
export interface ScheduleToolInput {
  action: 'create' | 'list' | 'delete' | 'run' | 'pause' | 'resume';
  jobId?: string;
  name?: string;
  description?: string;
  schedule?: JobSchedule;
  task?: string;
  /** A destination's name; a Delivery object only in calls recorded before named destinations (refused now). */
  delivery?: string | Delivery;
  deleteAfterRun?: boolean;
}
