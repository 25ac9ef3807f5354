import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApi } from '../api/server';
import { conversationWorkflowId } from '../domain/ids';
import { freePort } from '../scripts/ports';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { LOOPBACK_ALLOW } from './support/egress';

let keel: TestKeel;
let secured: TestKeel;
const ADMIN = 'admin-token-0123456789';
const SCOPED = 'scoped-token-0123456789';

beforeAll(async () => {
  keel = await startTestKeel();
  secured = await startTestKeel({
    tokens: new Map([
      [ADMIN, '*'],
      [SCOPED, 'agent-one'],
    ]),
  });
});
afterAll(async () => {
  await keel?.stop();
  await secured?.stop();
});

interface ErrorBody {
  error: { code: string; message: string; details?: unknown };
}

async function send(
  k: TestKeel,
  method: 'GET' | 'POST' | 'PUT',
  url: string,
  opts: { payload?: string; token?: string; contentType?: string } = {},
) {
  const res = await k.api.inject({
    method,
    url,
    headers: {
      ...(opts.payload !== undefined ? { 'content-type': opts.contentType ?? 'application/json' } : {}),
      ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
    },
    ...(opts.payload !== undefined ? { payload: opts.payload } : {}),
  });
  return { status: res.statusCode, body: res.json<ErrorBody & Record<string, unknown>>() };
}

const messages = (a = uniqueId('a'), c = uniqueId('c')) => `/v1/agents/${a}/conversations/${c}/messages`;

describe('bad input gets the error shape and the right status, and loses nothing', () => {
  it('malformed JSON → 400 invalid_json', async () => {
    const res = await send(keel, 'POST', messages(), { payload: '{"text": "hel' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_json');
    expect(res.body.error.message).toMatch(/JSON/);
  });

  it('a missing text → 400 naming the field', async () => {
    const res = await send(keel, 'POST', messages(), { payload: '{"author":"x"}' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    expect(res.body.error.message).toMatch(/text/);
  });

  it('a text of only whitespace (ideographic space, BOM included) → 400, as the OpenAPI pattern says', async () => {
    const res = await send(keel, 'POST', messages(), { payload: JSON.stringify({ text: ' \u3000\ufeff\n' }) });
    expect([res.status, res.body.error.message]).toEqual([400, expect.stringMatching(/text must not be empty/)]);
    const doc = (await keel.api.inject({ method: 'GET', url: '/docs/json' })).json<Record<string, unknown>>();
    expect(JSON.stringify(doc)).toContain('\\u3000');
  });

  it('a 33 KiB text → 413 text_too_large', async () => {
    const res = await send(keel, 'POST', messages(), { payload: JSON.stringify({ text: 'x'.repeat(33 * 1024) }) });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('text_too_large');
  });

  it('a body over 1 MiB → 413 body_too_large', async () => {
    const res = await send(keel, 'POST', messages(), {
      payload: JSON.stringify({ text: 'hi', author: 'y'.repeat(1024 * 1024 + 10) }),
    });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('body_too_large');
  });

  it('an unknown mode → 400', async () => {
    const res = await send(keel, 'POST', messages(), { payload: JSON.stringify({ text: 'hi', mode: 'shout' }) });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    expect(res.body.error.message).toMatch(/mode/);
  });

  it('an invalid delivery, an invalid path id and an out-of-range wait → 400', async () => {
    const badDelivery = await send(keel, 'POST', messages(), {
      payload: JSON.stringify({ text: 'hi', delivery: { channel: 'webhook', url: 'ftp://x' } }),
    });
    expect(badDelivery.status).toBe(400);
    const badId = await send(keel, 'POST', '/v1/agents/a%20b/conversations/c/messages', {
      payload: JSON.stringify({ text: 'hi' }),
    });
    expect(badId.status).toBe(400);
    const badWait = await send(keel, 'POST', `${messages()}?wait=500`, { payload: JSON.stringify({ text: 'hi' }) });
    expect(badWait.status).toBe(400);
  });

  it('a NUL character (which PostgreSQL cannot store) → 400, in a message and in an agent', async () => {
    const msg = await send(keel, 'POST', messages(), { payload: JSON.stringify({ text: 'a\u0000b' }) });
    expect(msg.status).toBe(400);
    expect(msg.body.error.message).toMatch(/NUL/);
    expect(
      (await send(keel, 'PUT', `/v1/agents/${uniqueId('a')}`, { payload: JSON.stringify({ name: 'x\u0000' }) })).status,
    ).toBe(400);
  });

  it('a transcript query beyond the range of seq → 400, not 500', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await send(keel, 'POST', `${messages(a, c)}?wait=30`, { payload: '{"text":"hi"}' });
    expect((await send(keel, 'GET', `/v1/agents/${a}/conversations/${c}?afterSeq=99999999999`)).status).toBe(400);
  });

  it('an empty number in a query string → 400 naming it, never read as 0 (a fuzz finding: ?afterSeq=)', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await send(keel, 'POST', `${messages(a, c)}?wait=30`, { payload: '{"text":"hi"}' });
    for (const [url, name] of [
      [`/v1/agents/${a}/conversations/${c}?afterSeq=`, 'afterSeq'],
      [`/v1/agents/${a}/conversations/${c}?limit=`, 'limit'],
      [`/v1/agents/${a}/conversations?limit=`, 'limit'],
      [`/v1/agents/${a}/audit?before=`, 'before'],
    ] as const) {
      const res = await send(keel, 'GET', url);
      expect({ url, status: res.status, code: res.body.error.code }).toEqual({
        url,
        status: 400,
        code: 'invalid_request',
      });
      expect(res.body.error.message).toContain(name);
      expect(res.body.error.message).toContain('expected a whole number');
    }
    const emptyWait = await send(keel, 'POST', `${messages(a, c)}?wait=`, { payload: '{"text":"again"}' });
    expect(emptyWait.status).toBe(400);
    // Absent, each takes its default: the whole transcript.
    const all = await send(keel, 'GET', `/v1/agents/${a}/conversations/${c}`);
    expect(all.status).toBe(200);
  });

  it('refused requests start no conversation', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await send(keel, 'POST', messages(a, c), { payload: JSON.stringify({ text: '' }) });
    await send(keel, 'POST', messages(a, c), { payload: JSON.stringify({ text: 'x'.repeat(40_000) }) });
    const res = await send(keel, 'GET', `/v1/agents/${a}/conversations/${c}`);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });

  it('an unknown route → 404 in the error shape', async () => {
    const res = await send(keel, 'GET', '/v1/nothing-here');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });
});

describe('auth', () => {
  it('no token or a wrong token → 401', async () => {
    expect((await send(secured, 'POST', messages('agent-one'), { payload: '{"text":"hi"}' })).status).toBe(401);
    const wrong = await send(secured, 'POST', messages('agent-one'), {
      payload: '{"text":"hi"}',
      token: 'not-a-token',
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe('unauthorized');
  });

  it('a token scoped to another agent → 403, naming the agent the token is for', async () => {
    const res = await send(secured, 'POST', messages('agent-two'), { payload: '{"text":"hi"}', token: SCOPED });
    expect(res.status).toBe(403);
    expect(res.body.error.message).toBe('this token is for agent agent-one, not for agent agent-two');
    expect((await send(secured, 'GET', '/v1/agents/agent-two', { token: SCOPED })).status).toBe(403);
  });

  it('a scoped token reaches its own agent, and * reaches every agent', async () => {
    const own = await send(secured, 'POST', `${messages('agent-one')}?wait=30`, {
      payload: '{"text":"mine"}',
      token: SCOPED,
    });
    expect(own.status).toBe(200);
    expect((own.body as unknown as { reply: { text: string } }).reply.text).toBe('echo: mine');
    expect((await send(secured, 'GET', '/v1/agents/agent-two/conversations', { token: ADMIN })).status).toBe(200);
  });

  it('/healthz and the OpenAPI document need no token', async () => {
    const health = await send(secured, 'GET', '/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ ok: true, postgres: true });
    const docs = await send(secured, 'GET', '/docs/json');
    expect(docs.status).toBe(200);
    const paths = Object.keys((docs.body as unknown as { paths: Record<string, unknown> }).paths);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/v1/agents/{agentId}',
        '/v1/agents/{agentId}/conversations/{conversationId}/messages',
        '/v1/agents/{agentId}/conversations/{conversationId}',
      ]),
    );
  });
});

describe('agents', () => {
  it('PUT configures an agent and GET reads it back', async () => {
    const a = uniqueId('agent');
    const put = await send(keel, 'PUT', `/v1/agents/${a}`, {
      payload: JSON.stringify({
        name: 'Helper',
        systemPrompt: 'Be brief.',
        owner: { delivery: { channel: 'slack', target: 'U123ABC' } },
        reflection: { enabled: true },
      }),
    });
    expect(put.status).toBe(200);
    const got = await send(keel, 'GET', `/v1/agents/${a}`);
    expect(got.body).toMatchObject({
      agentId: a,
      name: 'Helper',
      systemPrompt: 'Be brief.',
      owner: { delivery: { channel: 'slack', target: 'U123ABC' } },
      reflection: { enabled: true },
    });
  });

  it('an agent comes into being on first use, with defaults; reading it first does not make it', async () => {
    const a = uniqueId('agent');
    expect((await send(keel, 'GET', `/v1/agents/${a}`)).status).toBe(404);
    expect((await send(keel, 'GET', `/v1/agents/${a}/memory`)).status).toBe(200);
    expect((await send(keel, 'GET', `/v1/agents/${a}/budgets`)).status).toBe(200);
    expect((await send(keel, 'GET', `/v1/agents/${a}`)).status).toBe(404);
    const task = await send(keel, 'POST', `/v1/agents/${a}/tasks`, { payload: '{"title":"t"}' });
    expect(task.status).toBe(201);
    const got = await send(keel, 'GET', `/v1/agents/${a}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ agentId: a, name: a, model: null, reflection: { enabled: false } });
  });

  it('PUT with an unknown field or a bad owner delivery → 400', async () => {
    expect(
      (
        await send(keel, 'PUT', `/v1/agents/${uniqueId('a')}`, {
          payload: JSON.stringify({ name: 'x', colour: 'red' }),
        })
      ).status,
    ).toBe(400);
    expect(
      (
        await send(keel, 'PUT', `/v1/agents/${uniqueId('a')}`, {
          payload: JSON.stringify({ name: 'x', owner: { delivery: { channel: 'slack', target: '#general' } } }),
        })
      ).status,
    ).toBe(400);
  });
});

describe('a dependency that is down', () => {
  it('Temporal unreachable → 503 unavailable in the error shape; the kept message is answered once', async () => {
    // A lazy connection to a port where nothing listens: what the API holds while Temporal is down.
    const lazy = Connection.lazy({ address: `127.0.0.1:${await freePort()}`, connectTimeout: 500 });
    const api = await buildApi({
      pool: keel.pool,
      temporal: new Client({ connection: lazy }),
      taskQueue: 'nowhere',
      tokens: undefined,
      egressAllow: LOOPBACK_ALLOW,
      temporalDeadlineMs: 2_000,
    });
    try {
      const [a, c] = [uniqueId('a'), uniqueId('c')];
      const res = await api.inject({
        method: 'POST',
        url: messages(a, c),
        headers: { 'content-type': 'application/json' },
        payload: '{"text":"hello?"}',
      });
      expect(res.statusCode).toBe(503);
      expect(res.json<ErrorBody>().error.code).toBe('unavailable');
      // The generated messageId comes back, so the client can retry without risking a second turn.
      const details = res.json<ErrorBody>().error.details as { messageId?: unknown };
      expect(typeof details.messageId).toBe('string');
      const messageId = details.messageId as string;
      // Recorded before it was handed over: the retry (Temporal back) hands it over again and it is answered once.
      const again = await keel.post(a, c, { text: 'hello?', messageId }, { wait: 30 });
      expect([again.status, again.body.reply?.text]).toEqual([200, 'echo: hello?']);
      const { rowCount } = await keel.pool.query('SELECT 1 FROM turns WHERE conversation_key = $1', [
        conversationWorkflowId(a, c),
      ]);
      expect(rowCount).toBe(1);
    } finally {
      await api.close();
    }
  });

  it('Temporal unreachable on a route with no handling of its own (PUT routine) → 503 unavailable', async () => {
    // The generic error handler judges Temporal's errors by gRPC status: UNAVAILABLE is still "try again". (No
    // interceptors: the SDK's retries of UNAVAILABLE would only make the test wait longer for the same answer.)
    const lazy = Connection.lazy({ address: `127.0.0.1:${await freePort()}`, connectTimeout: 500, interceptors: [] });
    const temporal = new Client({ connection: lazy });
    const api = await buildApi({
      pool: keel.pool,
      temporal,
      taskQueue: 'nowhere',
      tokens: undefined,
      egressAllow: LOOPBACK_ALLOW,
    });
    try {
      const a = uniqueId('a');
      const app = await send(keel, 'PUT', `/v1/agents/${a}/apps/crm`, { payload: '{"name":"crm","tables":[]}' });
      expect(app.status).toBe(200);
      const res = await api.inject({
        method: 'PUT',
        url: `/v1/agents/${a}/apps/crm/routines/nightly`,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ label: 'nightly', schedule: { expr: 'daily' }, prompt: 'hello' }),
      });
      expect([res.statusCode, res.json<ErrorBody>().error.code]).toEqual([503, 'unavailable']);
      const said = 'Temporal is not reachable, overloaded or did not answer in time (UNAVAILABLE); try again';
      expect(res.json<ErrorBody>().error.message).toBe(said);
      // Nothing half-made: the routine's row rolled back with the Schedule that could not be created.
      const { rowCount } = await keel.pool.query('SELECT 1 FROM routines WHERE agent_id = $1', [a]);
      expect(rowCount).toBe(0);
    } finally {
      await api.close();
    }
  });

  it('a known path with another method gets 405 with Allow; an unknown path 404, both in the error shape', async () => {
    const k = await startTestKeel({ worker: false });
    const keelApi = k.api;
    try {
      const wrong = await keelApi.inject({ method: 'DELETE', url: '/v1/agents/a1/conversations/c1/messages' });
      expect(wrong.statusCode).toBe(405);
      expect(wrong.headers.allow).toBe('POST');
      expect(wrong.json<{ error: { code: string } }>().error.code).toBe('method_not_allowed');
      const unknown = await keelApi.inject({ method: 'GET', url: '/v1/nothing/here' });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json<{ error: { code: string } }>().error.code).toBe('not_found');
      // A method with a body that no route takes (QUERY) is told the allowed methods too, not refused for its body.
      const query = await keelApi.inject({ method: 'QUERY' as 'GET', url: '/v1/agents/a1/conversations/c1' });
      expect([query.statusCode, query.headers.allow]).toEqual([405, 'GET, HEAD, DELETE']);
      // An overlong path segment: the router's refusal in the error shape; a long id within limits reaches the schema.
      const overlong = await keelApi.inject({ method: 'GET', url: `/v1/agents/${'a'.repeat(5000)}` });
      expect([overlong.statusCode, overlong.json<{ error: { code: string } }>().error.code]).toEqual([
        414,
        'uri_too_long',
      ]);
      const longId = await keelApi.inject({ method: 'GET', url: `/v1/agents/${'a'.repeat(129)}` });
      expect([longId.statusCode, longId.json<{ error: { code: string } }>().error.code]).toEqual([
        400,
        'invalid_request',
      ]);
      // The OpenAPI document names the errors every route can answer.
      const doc = (await keelApi.inject({ method: 'GET', url: '/docs/json' })).json<{
        paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
      }>();
      expect(Object.keys(doc.paths['/v1/agents/{agentId}/jobs']!.get!.responses)).toEqual(
        expect.arrayContaining(['200', '400', '401', '404', '405', '413', '414', '503']),
      );
    } finally {
      await k.stop();
    }
  });
});
