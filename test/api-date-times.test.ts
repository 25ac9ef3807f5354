import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dateTime, instantOf } from '../domain/text';
import { endedEval, type Evaluation } from './support/evals';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';

/**
 * Every date-time the API takes (issue 50): evaluations' `since`/`until`, usage's `from`/`to` and a job's `at`. RFC
 * 3339 allows any offset up to ±23:59, which PostgreSQL's timestamptz does not read (a +18:55 answered 500), so each
 * is given on in UTC; what is not RFC 3339 (a year past PostgreSQL's, 294277) is a 400 naming the parameter.
 */
let keel: TestKeel;
/** An agent with one recorded turn (one model call), and one for the reproduction, whose evaluation calls the model. */
const agent = uniqueId('dates');
const fz = uniqueId('fz');
const conversation = uniqueId('recorded');
/** When the agent's one recorded turn was asked for, as the API shows it. */
let turnAt: Date;

async function recorded(agentId: string): Promise<Date> {
  expect((await keel.call('PUT', `/v1/agents/${agentId}`, { name: agentId })).status).toBe(200);
  const res = await keel.post(agentId, conversation, { text: 'hello' }, { wait: 30 });
  expect(res.body.status, JSON.stringify(res.body)).toBe('replied');
  const view = await keel.call<{ messages: { at: string }[] }>(
    'GET',
    `/v1/agents/${agentId}/conversations/${conversation}`,
  );
  return new Date(view.body.messages[0]!.at);
}

beforeAll(async () => {
  keel = await startTestKeel();
  [turnAt] = await Promise.all([recorded(agent), recorded(fz)]);
}, 120_000);
afterAll(async () => keel?.stop());

const HOUR = 3_600_000;
const OFFSETS = ['+18:55', '-18:55', '+23:59', '-23:59', 'Z'] as const;

/** The instant written in RFC 3339 at an offset: `2026-12-08T20:20:00+18:55` is 2026-12-08T01:25:00Z. */
function at(instant: Date, offset: (typeof OFFSETS)[number]): string {
  if (offset === 'Z') return instant.toISOString();
  const minutes = (offset[0] === '-' ? -1 : 1) * (Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4)));
  return `${new Date(instant.getTime() + minutes * 60_000).toISOString().slice(0, 23)}${offset}`;
}

/** Literal times at the edges: year 67, and the first and last instants RFC 3339 can write (2 BC and AD 10000). */
const YEAR_67 = '0067-03-01T00:00:00+18:55';
const FIRST = '0000-01-01T00:00:00+23:59';
const LAST = '9999-12-31T23:59:59.999999-23:59';
/** Past PostgreSQL's last year (294276); RFC 3339 has four-digit years, so this is not a date-time at all. */
const PAST_POSTGRES = ['+294277-01-01T00:00:00Z', '294277-01-01T00:00:00Z'];

interface ErrorBody {
  error: { code: string; message: string; details?: { path: string; message: string }[] | { field: string } };
}

describe('the one date-time schema', () => {
  it.each([
    ['0489-05-29T10:27:34+18:55', '0489-05-28T15:32:34Z'],
    ['2026-06-01T00:10:00-23:59', '2026-06-02T00:09:00Z'],
    ['2026-06-01T00:10:00.123456789+23:59', '2026-05-31T00:11:00.123456Z'],
    ['2026-06-01T09:00:00Z', '2026-06-01T09:00:00Z'],
    [YEAR_67, '0067-02-28T05:05:00Z'],
    [FIRST, '0002-12-31T00:01:00Z BC'],
    ['0001-01-01T00:00:00+00:01', '0001-12-31T23:59:00Z BC'],
    [LAST, '10000-01-01T23:58:59.999999Z'],
  ])('%s is the UTC text %s, which PostgreSQL reads as the same instant', async (given, utc) => {
    expect(dateTime().parse(given)).toBe(utc);
    const { rows } = await keel.pool.query<{ ms: string }>(
      'SELECT floor(extract(epoch FROM $1::timestamptz) * 1000)::bigint::text AS ms',
      [utc],
    );
    // Date.parse reads every RFC 3339 time (to the millisecond); instantOf reads the UTC text back.
    const ms = Date.parse(given);
    expect(Number(rows[0]!.ms)).toBe(ms);
    expect(instantOf(utc)?.getTime()).toBe(ms);
    expect(instantOf(given)?.getTime()).toBe(ms);
  });

  it('PostgreSQL itself refuses the text as it came: an offset past ±15:59, and the year 0000', async () => {
    for (const given of ['0489-05-29T10:27:34+18:55', '2026-06-01T00:10:00-23:59', '0000-06-01T00:00:00Z'])
      await expect(keel.pool.query('SELECT $1::timestamptz', [given])).rejects.toThrow(/out of range/);
  });

  it.each([...PAST_POSTGRES, '2026-02-30T00:00:00Z', '2026-06-01T09:00:00', '2026-06-01T09:00Z', '2026-06-01'])(
    '%s is refused',
    (given) => {
      const parsed = dateTime().safeParse(given);
      expect(parsed.error?.issues[0]?.message).toMatch(/^expected an RFC 3339 date-time/);
      expect(instantOf(given)).toBeUndefined();
    },
  );
});

describe("an evaluation's recorded.query.since and until", () => {
  const select = (query: Record<string, unknown>) =>
    keel.call<Evaluation & ErrorBody>('POST', `/v1/agents/${agent}/evals`, { mode: 'replay', recorded: { query } });
  const selected = (query: Record<string, unknown>) =>
    select(query).then((r) => ({ status: r.status, cases: r.body.cases?.map((c) => c.caseId), raw: r.raw }));
  const theCase = [`conversation:${conversation}`];
  const noCase = { status: 400, cases: undefined };

  it('the reproduction: a since at +18:55 is a valid date, accepted (it answered 500)', async () => {
    const started = await keel.call<Evaluation>('POST', `/v1/agents/${fz}/evals`, {
      mode: 'live-model',
      recorded: { query: { since: '0489-05-29T10:27:34+18:55', limit: 1 } },
    });
    expect(started.status, started.raw).toBe(202);
    expect(started.body.cases.map((c) => c.caseId)).toEqual(theCase);
    expect((await endedEval(keel, fz, started.body.id)).status).toBe('finished');
  });

  it.each(OFFSETS)('at %s: an hour before the turn selects it, an hour after does not', async (offset) => {
    const before = at(new Date(turnAt.getTime() - HOUR), offset);
    const after = at(new Date(turnAt.getTime() + HOUR), offset);
    expect(await selected({ since: before })).toMatchObject({ status: 202, cases: theCase });
    expect(await selected({ since: after })).toMatchObject(noCase);
    expect(await selected({ until: after })).toMatchObject({ status: 202, cases: theCase });
    expect(await selected({ until: before })).toMatchObject(noCase);
    expect(await selected({ since: before, until: after })).toMatchObject({ status: 202, cases: theCase });
  });

  it('the year 67 and the first and last instants RFC 3339 can write, each in PostgreSQL range', async () => {
    expect(await selected({ since: YEAR_67 })).toMatchObject({ status: 202, cases: theCase });
    expect(await selected({ since: FIRST, until: LAST })).toMatchObject({ status: 202, cases: theCase });
    expect(await selected({ until: YEAR_67 })).toMatchObject(noCase);
    expect(await selected({ until: FIRST })).toMatchObject(noCase);
    expect(await selected({ since: LAST })).toMatchObject(noCase);
    const none = await select({ since: LAST });
    expect(none.body.error).toEqual({ code: 'invalid_request', message: 'the evaluation selects no case' });
  });

  it.each(PAST_POSTGRES)('%s, past PostgreSQL’s range, is a 400 naming the parameter', async (given) => {
    for (const name of ['since', 'until']) {
      const res = await select({ [name]: given });
      expect(res.status, res.raw).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
      expect(res.body.error.message).toMatch(new RegExp(`^invalid body: /recorded/query/${name} expected an RFC 3339`));
      expect(res.body.error.details).toEqual([expect.objectContaining({ path: `/recorded/query/${name}` })]);
    }
  });
});

describe("usage's from and to", () => {
  interface Usage {
    from: string;
    to: string;
    total: { calls: number };
  }
  const usage = (query: Record<string, string>) =>
    keel.call<Usage & ErrorBody>('GET', `/v1/agents/${agent}/usage?${new URLSearchParams(query).toString()}`);

  it.each(OFFSETS)('at %s: given on in UTC, and the call counted only within them', async (offset) => {
    const before = new Date(turnAt.getTime() - HOUR);
    const after = new Date(turnAt.getTime() + HOUR);
    const around = await usage({ from: at(before, offset), to: at(after, offset) });
    expect(around.status, around.raw).toBe(200);
    expect(around.body).toMatchObject({ from: before.toISOString(), to: after.toISOString(), total: { calls: 1 } });
    const later = await usage({ from: at(after, offset) });
    expect(later.status, later.raw).toBe(200);
    expect(later.body).toMatchObject({ from: after.toISOString(), total: { calls: 0 } });
  });

  it('the year 67 and the first and last instants RFC 3339 can write', async () => {
    expect((await usage({ from: YEAR_67 })).body).toMatchObject({
      from: '0067-02-28T05:05:00.000Z',
      total: { calls: 1 },
    });
    expect((await usage({ from: FIRST, to: LAST })).body).toMatchObject({
      from: '-000001-12-31T00:01:00.000Z',
      to: '+010000-01-01T23:58:59.999Z',
      total: { calls: 1 },
    });
    expect((await usage({ to: YEAR_67 })).body).toMatchObject({ to: '0067-02-28T05:05:00.000Z', total: { calls: 0 } });
  });

  it.each(PAST_POSTGRES)('%s, past PostgreSQL’s range, is a 400 naming the parameter', async (given) => {
    for (const name of ['from', 'to']) {
      const res = await usage({ [name]: given });
      expect(res.status, res.raw).toBe(400);
      expect(res.body.error.message).toMatch(new RegExp(`^invalid querystring: /${name} expected an RFC 3339`));
      expect(res.body.error.details).toEqual([expect.objectContaining({ path: `/${name}` })]);
    }
  });
});

describe("a job's schedule.at", () => {
  const job = (when: string) =>
    keel.call<{ schedule: { kind: string; at: string }; nextRunAt: string } & ErrorBody>(
      'POST',
      `/v1/agents/${agent}/jobs`,
      { name: uniqueId('once'), task: 'once', schedule: { kind: 'at', at: when } },
    );

  it.each(OFFSETS)('at %s: kept in UTC, and it fires then', async (offset) => {
    const fire = new Date(Math.ceil((Date.now() + 48 * HOUR) / 60_000) * 60_000);
    const res = await job(at(fire, offset));
    expect(res.status, res.raw).toBe(201);
    expect(res.body.schedule).toEqual({ kind: 'at', at: fire.toISOString() });
    expect(res.body.nextRunAt).toBe(fire.toISOString());
  });

  it.each([
    [YEAR_67, 'at must be strictly in the future'],
    [FIRST, 'at must be strictly in the future'],
    [LAST, 'at must be before the year 2101'],
  ])('%s is a valid date-time the job rules refuse: 400 naming schedule.at', async (given, message) => {
    const res = await job(given);
    expect(res.status, res.raw).toBe(400);
    expect(res.body.error).toEqual({ code: 'invalid_schedule', message, details: { field: 'schedule.at' } });
  });

  it.each(PAST_POSTGRES)('%s, past PostgreSQL’s range, is a 400 naming the parameter', async (given) => {
    const res = await job(given);
    expect(res.status, res.raw).toBe(400);
    expect(res.body.error.message).toMatch(/^invalid body: \/schedule\/at expected an RFC 3339 date-time/);
    expect(res.body.error.details).toEqual([expect.objectContaining({ path: '/schedule/at' })]);
  });
});
