import { describe, expect, it } from 'vitest';
import type { DeliveryOutcome } from '../../domain/delivery';
import {
  JOBS,
  NewJob,
  afterDelivery,
  failsAfterErrors,
  nextFire,
  retryDelayMs,
  validateNewJob,
  type JobContext,
} from '../../domain/jobs';

const now = new Date('2026-06-01T12:00:00Z');
const ctx: JobContext = { now, existingJobs: 0, nameTaken: false };
const job = (over: Partial<NewJob> = {}): NewJob => ({
  name: 'daily digest',
  task: 'Summarise the inbox.',
  schedule: { kind: 'every', intervalMs: 60_000 },
  ...over,
});
const error = (j: NewJob, c: JobContext = ctx) => {
  const v = validateNewJob(j, c);
  if (v.ok) throw new Error('expected a refusal');
  return v.error;
};

describe('validateNewJob: every rule, with its code, field and status', () => {
  it('the 1,001st job of an agent → 429 job_limit', () => {
    expect(validateNewJob(job(), { ...ctx, existingJobs: 999 }).ok).toBe(true);
    expect(error(job(), { ...ctx, existingJobs: 1000 })).toMatchObject({ code: 'job_limit', status: 429 });
  });

  it('a task over 32,768 UTF-8 bytes → 413 task_too_large; exactly 32,768 is accepted', () => {
    expect(validateNewJob(job({ task: 'x'.repeat(JOBS.taskBytes) }), ctx).ok).toBe(true);
    expect(error(job({ task: 'x'.repeat(JOBS.taskBytes + 1) }))).toMatchObject({
      code: 'task_too_large',
      field: 'task',
      status: 413,
    });
    expect(error(job({ task: 'é'.repeat(JOBS.taskBytes / 2 + 1) }))).toMatchObject({ code: 'task_too_large' });
  });

  it('a name taken ignoring case → 409 job_name_taken; names of 1–200 characters', () => {
    expect(error(job(), { ...ctx, nameTaken: true })).toMatchObject({
      code: 'job_name_taken',
      field: 'name',
      status: 409,
    });
    expect(error(job({ name: '  ' }))).toMatchObject({ code: 'invalid_request', field: 'name', status: 400 });
    expect(error(job({ name: 'n'.repeat(201) }))).toMatchObject({ field: 'name' });
    expect(validateNewJob(job({ name: 'n'.repeat(200) }), ctx).ok).toBe(true);
    expect(error(job({ description: 'd'.repeat(1001) }))).toMatchObject({ field: 'description', status: 400 });
  });

  it.each([
    ['@daily', { kind: 'cron', expr: '@daily' }, 'schedule.expr', /nicknames/],
    ['a past at', { kind: 'at', at: '2026-05-31T12:00:00Z' }, 'schedule.at', /strictly in the future/],
    ['an at equal to now', { kind: 'at', at: '2026-06-01T12:00:00Z' }, 'schedule.at', /strictly in the future/],
    ['an at without a zone', { kind: 'at', at: '2027-01-01T09:00:00' }, 'schedule.at', /ISO-8601/],
    [
      'a cron with no future fire',
      { kind: 'cron', expr: '0 0 30 2 *' },
      'schedule.expr',
      /no future fire|does not parse/,
    ],
    ['a bad time zone', { kind: 'cron', expr: '0 9 * * *', tz: 'Mars/Olympus' }, 'schedule.tz', /IANA/],
    ['six cron fields', { kind: 'cron', expr: '0 0 9 * * *' }, 'schedule.expr', /exactly 5 fields/],
    ['garbage cron', { kind: 'cron', expr: 'every day at 9' }, 'schedule.expr', /5 fields|does not parse/],
    ['an every below the floor', { kind: 'every', intervalMs: 59_999 }, 'schedule.intervalMs', /at least 60000/],
    ['a zero every', { kind: 'every', intervalMs: 0 }, 'schedule.intervalMs', /positive/],
    ['a fractional every', { kind: 'every', intervalMs: 60_000.5 }, 'schedule.intervalMs', /whole/],
    ['an every of more than 10 years', { kind: 'every', intervalMs: 1e20 }, 'schedule.intervalMs', /at most/],
    ['an at on February 30', { kind: 'at', at: '2027-02-30T00:00:00Z' }, 'schedule.at', /ISO-8601/],
    ['an at after 2100', { kind: 'at', at: '2101-01-01T00:00:00Z' }, 'schedule.at', /before the year 2101/],
    ['a cron with L', { kind: 'cron', expr: '0 9 L * *' }, 'schedule.expr', /not L, W, # or \?/],
    ['a cron with #', { kind: 'cron', expr: '0 9 * * MON#2' }, 'schedule.expr', /not L, W, # or \?/],
    [
      'a cron restricting day-of-month and day-of-week',
      { kind: 'cron', expr: '0 9 1 * MON' },
      'schedule.expr',
      /not both/,
    ],
  ] as const)('%s → 400 invalid_schedule naming the rule', (_, schedule, field, message) => {
    const e = error(job({ schedule }));
    expect(e).toMatchObject({ code: 'invalid_schedule', field, status: 400 });
    expect(e.message).toMatch(message);
  });

  it('a bad Slack target or webhook URL is refused by the job schema', () => {
    expect(NewJob.safeParse({ ...job(), delivery: { channel: 'slack', target: '#general' } }).success).toBe(false);
    expect(NewJob.safeParse({ ...job(), delivery: { channel: 'webhook', url: 'ftp://example.com' } }).success).toBe(
      false,
    );
    expect(NewJob.safeParse({ ...job(), delivery: { channel: 'slack', target: 'C0123ABC' } }).success).toBe(true);
  });

  it('spells the time zone as Temporal does', () => {
    expect(
      validateNewJob(job({ schedule: { kind: 'cron', expr: '0 9 * * WED', tz: 'america/new_york' } }), ctx),
    ).toMatchObject({ ok: true, schedule: { tz: 'America/New_York' } });
  });

  it('the every floor is configurable', () => {
    expect(
      validateNewJob(job({ schedule: { kind: 'every', intervalMs: 1000 } }), { ...ctx, everyFloorMs: 1000 }).ok,
    ).toBe(true);
  });

  it('accepts month and weekday names, defaults the zone to UTC and computes the next fire in that zone', () => {
    const v = validateNewJob(job({ schedule: { kind: 'cron', expr: '30 9 * JUN MON' } }), ctx);
    expect(v).toMatchObject({ ok: true, schedule: { kind: 'cron', expr: '30 9 * JUN MON', tz: 'UTC' } });
    if (v.ok) expect(v.nextRunAt.toISOString()).toBe('2026-06-08T09:30:00.000Z');
    const berlin = validateNewJob(job({ schedule: { kind: 'cron', expr: '0 9 * * *', tz: 'Europe/Berlin' } }), ctx);
    if (berlin.ok) expect(berlin.nextRunAt.toISOString()).toBe('2026-06-02T07:00:00.000Z');
    else throw new Error('expected ok');
  });

  it('an at job fires at its time, an every job one interval from now', () => {
    const at = validateNewJob(job({ schedule: { kind: 'at', at: '2026-06-01T14:00:00+01:00' } }), ctx);
    expect(at.ok && at.nextRunAt.toISOString()).toBe('2026-06-01T13:00:00.000Z');
    const every = validateNewJob(job({ schedule: { kind: 'every', intervalMs: 3_600_000 } }), ctx);
    expect(every.ok && every.nextRunAt.toISOString()).toBe('2026-06-01T13:00:00.000Z');
  });
});

describe('retries and failure', () => {
  it('backs off 30 s, 1 min, 5 min, 15 min, then every 60 min', () => {
    expect([1, 2, 3, 4, 5, 6, 9].map((n) => retryDelayMs(n))).toEqual([
      30_000, 60_000, 300_000, 900_000, 3_600_000, 3_600_000, 3_600_000,
    ]);
  });

  it('stops early when the next cron fire is sooner', () => {
    expect(retryDelayMs(4, 120_000)).toBe(120_000);
    expect(retryDelayMs(1, 120_000)).toBe(30_000);
  });

  it('a one-shot fails after 3 consecutive errors, any job after 10', () => {
    expect([2, 3].map((n) => failsAfterErrors('at', n))).toEqual([false, true]);
    expect([9, 10].map((n) => failsAfterErrors('cron', n))).toEqual([false, true]);
    expect(failsAfterErrors('every', 3)).toBe(false);
  });

  it('nextFire: none for a past one-shot', () => {
    expect(nextFire({ kind: 'at', at: '2026-05-01T00:00:00.000Z' }, now)).toBeNull();
    expect(nextFire({ kind: 'cron', expr: '0 0 1 1 *', tz: 'UTC' }, now)?.toISOString()).toBe(
      '2027-01-01T00:00:00.000Z',
    );
  });
});

describe('after a successful run, by its delivery outcome', () => {
  const outcomes: DeliveryOutcome[] = [
    'delivered',
    'skipped:channel_none',
    'skipped:empty_reply',
    'error:http_503',
    'dropped:http_404',
  ];

  it('a job that deletes itself goes once its result was delivered or skipped, else it is kept, failed', () => {
    expect(outcomes.map((o) => afterDelivery(true, o))).toEqual(['deleted', 'deleted', 'deleted', 'failed', 'failed']);
  });

  it('any other job is kept, whatever its delivery', () => {
    expect(outcomes.map((o) => afterDelivery(false, o))).toEqual(['kept', 'kept', 'kept', 'kept', 'kept']);
  });
});
