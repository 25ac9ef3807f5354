import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApi } from '../api/server';
import { EVENTS_CHANNEL, type ConversationEvent } from '../db/events';
import { conversationWorkflowId } from '../domain/ids';
import { eventually, startTestKeel, uniqueId, type SubmitAnswer, type TestKeel } from './support/keel';
import { LOOPBACK_ALLOW } from './support/egress';

/** The hub's LISTEN connection is told apart from every other backend by the API pool's application name. */
const APP = 'keel-turn-wait-test';
/** The API's fallback read interval (api/routes/conversations.ts). */
const FALLBACK_READ_MS = 5_000;

let keel: TestKeel;
let api: FastifyInstance;
let apiPool: pg.Pool;
let listener: pg.Client;
/** Every statement the API sent through its pool (the hub's own LISTEN connection is not one of the pool's). */
let apiQueries = 0;
/** When each turn's turn.finished NOTIFY reached this test, by turn id. */
const finishedAt = new Map<string, number>();

beforeAll(async () => {
  keel = await startTestKeel();
  const connectionString = inject('databaseUrl');
  apiPool = new pg.Pool({ connectionString, application_name: APP, max: 10 });
  apiPool.on('error', () => undefined);
  apiPool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((...args: unknown[]) => {
      apiQueries++;
      return query(...args);
    }) as typeof client.query;
  });
  // An API of the test's own over that pool; the worker (and its queries) stays on keel's pool.
  api = await buildApi({
    pool: apiPool,
    temporal: keel.client,
    taskQueue: keel.taskQueue,
    tokens: undefined,
    egressAllow: LOOPBACK_ALLOW,
  });
  listener = new pg.Client({ connectionString });
  await listener.connect();
  listener.on('notification', (n) => {
    const e = JSON.parse(n.payload ?? '{}') as ConversationEvent;
    if (e.type === 'turn.finished') finishedAt.set(String(e.data.turnId), Date.now());
  });
  await listener.query(`LISTEN ${EVENTS_CHANNEL}`);
});
afterAll(async () => {
  await listener?.end();
  await api?.close();
  await apiPool?.end();
  await keel?.stop();
});

async function post(a: string, c: string, body: Record<string, unknown>, wait = 0) {
  const res = await api.inject({
    method: 'POST',
    url: `/v1/agents/${a}/conversations/${c}/messages${wait ? `?wait=${wait}` : ''}`,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  return { status: res.statusCode, body: res.json<SubmitAnswer>(), at: Date.now() };
}

/** The statements a submission makes without a wait (it records the message): what each wait's reads add to. */
async function statementsOf(submit: () => Promise<unknown>): Promise<number> {
  const before = apiQueries;
  await submit();
  return apiQueries - before;
}

async function terminate(a: string, c: string): Promise<void> {
  await keel.client.workflow
    .getHandle(conversationWorkflowId(a, c))
    .terminate('test done')
    .catch(() => undefined);
}

describe('a submission with wait is woken by its turn’s NOTIFY', () => {
  it('answers 200 with the reply within 1 s of turn.finished, reading only at the start and at the end', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const own = await statementsOf(() => post(uniqueId('a'), uniqueId('c'), { text: 'a first message' }));
    const before = apiQueries;
    const res = await post(a, c, { text: '/delay 1500 hi' }, 30);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'replied', reply: { text: 'echo: hi' } });
    const finished = await eventually(async () => finishedAt.get(res.body.turnId), 5_000, 'turn.finished');
    expect(res.at - finished).toBeLessThan(1_000);
    // Its own statements, then one read when the wait began, one when turn.finished arrived (two statements each);
    // 50 ms polling: ~60 more.
    expect(apiQueries - before).toBeLessThanOrEqual(own + 4);
  });

  it('20 submissions waiting 3 s on a turn that does not end make at most 3 queries each', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    // Streams text deltas (NOTIFY too) for 20 s: none of them is a turn's end.
    expect((await post(a, c, { text: '/delay 20000 slow' })).status).toBe(202);
    // Queued first, one by one; then the same messages again (same messageId: the same turn) to wait for them.
    const queued: string[] = [];
    for (let i = 0; i < 20; i++) queued.push((await post(a, c, { text: `queued ${i}` })).body.messageId);
    // A message sent again, without a wait: what each of the 20 costs before its wait.
    const own = await statementsOf(() => post(a, c, { messageId: queued[0], text: 'queued 0' }));
    const before = apiQueries;
    const answers = await Promise.all(queued.map((messageId, i) => post(a, c, { messageId, text: `queued ${i}` }, 3)));
    for (const r of answers) expect(r).toMatchObject({ status: 202, body: { status: 'queued' } });
    // 50 ms polling would read ~60 times per request over 3 s (two statements each).
    expect(apiQueries - before).toBeLessThanOrEqual(20 * (own + 3));
    await terminate(a, c);
  });

  it('with the LISTEN connection terminated, the fallback read answers within its interval', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const own = await statementsOf(() => post(uniqueId('a'), uniqueId('c'), { text: 'a first message' }));
    const before = apiQueries;
    const waiting = post(a, c, { text: '/delay 1500 after the loss' }, 30);
    // The wait subscribes before its first read: once it has read (after the submission's own), it is listening.
    await eventually(async () => apiQueries > before + own, 10_000, 'the first read of the wait');
    const { rows } = await keel.pool.query<{ terminated: boolean }>(
      `SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
        WHERE application_name = $1 AND query ILIKE 'LISTEN%'`,
      [APP],
    );
    expect(rows).toEqual([{ terminated: true }]);
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'replied', reply: { text: 'echo: after the loss' } });
    const finished = await eventually(async () => finishedAt.get(res.body.turnId), 5_000, 'turn.finished');
    expect(res.at - finished).toBeLessThan(FALLBACK_READ_MS + 1_000);
    // Its own statements, the first read, then fallback reads only (the NOTIFY went to a connection that was gone).
    expect(apiQueries - before).toBeLessThanOrEqual(own + 6);
  });
});

interface StateView {
  busy: boolean;
  queued: number;
  liveDelegates: string[];
}

describe('the state of a conversation whose workflow is closed', () => {
  it('is idle (not busy, nothing queued, no live delegates), answered without a worker', async () => {
    // A stack of its own: its worker is stopped below, so no worker could answer a query by replaying.
    const own = await startTestKeel();
    try {
      const [a, c] = [uniqueId('a'), uniqueId('c')];
      const url = `/v1/agents/${a}/conversations/${c}`;
      const view = async () => (await own.api.inject({ method: 'GET', url })).json<{ state: StateView }>().state;
      expect((await own.post(a, c, { text: '/delay 5000 long' })).status).toBe(202);
      expect((await own.post(a, c, { text: 'next' })).body.status).toBe('queued');
      await eventually(async () => {
        const s = await view();
        return s.busy && s.queued === 1;
      }, 10_000);
      await own.client.workflow.getHandle(conversationWorkflowId(a, c)).terminate('closed for the test');
      await own.stopWorker();
      const started = Date.now();
      const res = await own.api.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(200);
      // A query on the closed workflow would have made a worker replay it (busy, 1 queued), or without one timed out
      // into PostgreSQL's view (a turn still marked running).
      expect(res.json<{ state: StateView }>().state).toEqual({ busy: false, queued: 0, liveDelegates: [] });
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      await own.stop();
    }
  });
});
