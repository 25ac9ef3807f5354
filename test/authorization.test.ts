import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiMethod } from './support/keel';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';

/**
 * The one authorization gate (api/auth.ts), walked over every operation the OpenAPI document lists: no token is
 * 401, another agent's token and an agent's token on an operators' route are 403, a read-only token may read but not
 * change, and nothing of this is ever answered 2xx or 5xx.
 */
const OPERATOR = 'gate-operator-token';
const AGENT_A = 'gate-agent-a-token';
const READER_A = 'gate-reader-a-token';
const READER_ALL = 'gate-reader-all-token';
/** Configured by its SHA-256 alone: the configuration holds no usable token. */
const BY_DIGEST = 'gate-digest-token';
const A = 'agent-a';
const B = 'agent-b';

let keel: TestKeel;
beforeAll(async () => {
  keel = await startTestKeel({
    tokens: new Map([
      [OPERATOR, '*'],
      [AGENT_A, A],
      [READER_A, `ro:${A}`],
      [READER_ALL, 'ro:*'],
      [`sha256:${createHash('sha256').update(BY_DIGEST).digest('hex')}`, A],
    ]),
  });
  // A route added with no check of its own, as a new route would be: the gate guards it all the same.
  keel.api.get('/v1/agents/:agentId/probe', async (req) => ({ agentId: (req.params as { agentId: string }).agentId }));
});
afterAll(() => keel?.stop());

interface Operation {
  method: ApiMethod;
  path: string;
}

/** Every operation of the document, its path parameters filled in; `{agentId}` with `agent`. */
async function operations(agent: string): Promise<Operation[]> {
  const doc = (await keel.api.inject({ method: 'GET', url: '/docs/json' })).json<{
    paths: Record<string, Record<string, unknown>>;
  }>();
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths))
    for (const method of Object.keys(methods)) {
      const upper = method.toUpperCase();
      if (!['GET', 'PUT', 'POST', 'PATCH', 'DELETE'].includes(upper)) continue;
      const filled = path.replace(/\{(\w+)\}/g, (_m, name: string) => (name === 'agentId' ? agent : `x${name}1`));
      ops.push({ method: upper as ApiMethod, path: filled });
    }
  return ops;
}

const PUBLIC = /^\/(healthz|docs|console)(\/|$)/;

async function answer(op: Operation, token?: string): Promise<number> {
  const res = await keel.api.inject({
    method: op.method,
    url: op.path,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(op.method === 'GET' || op.method === 'DELETE' ? {} : { 'content-type': 'application/json' }),
    },
    ...(op.method === 'GET' || op.method === 'DELETE' ? {} : { payload: '{}' }),
  });
  return res.statusCode;
}

/** Each operation's status, listed where it is not what `expected` says. */
async function walk(ops: Operation[], token: string | undefined, expected: (op: Operation, status: number) => boolean) {
  const wrong: string[] = [];
  for (const op of ops) {
    const status = await answer(op, token);
    if (!expected(op, status) || status >= 500) wrong.push(`${op.method} ${op.path}: ${status}`);
  }
  return wrong;
}

const isAgentRoute = (op: Operation, agent: string) => op.path.startsWith(`/v1/agents/${agent}`);
const isOperatorRoute = (op: Operation) => /^\/(v1\/runs\/|v1\/approvals|codec\/|metrics)/.test(op.path);
/** A conversation's event stream stays open for as long as it is read: its answer to a reader is not awaited here. */
const isStream = (op: Operation) => op.path.endsWith('/events');

describe('one authorization gate over every operation', () => {
  it('the document lists the operations walked here', async () => {
    const ops = await operations(B);
    expect(ops.length).toBeGreaterThan(50);
    expect(ops.filter((op) => isAgentRoute(op, B)).length).toBeGreaterThan(40);
  });

  it('without a token: 401 everywhere but the public pages', async () => {
    const ops = (await operations(B)).filter((op) => !PUBLIC.test(op.path));
    expect(await walk(ops, undefined, (_op, status) => status === 401)).toEqual([]);
  });

  it("with another agent's token: 403 on that agent's routes and on operators' routes, never 2xx", async () => {
    const ops = (await operations(B)).filter((op) => !PUBLIC.test(op.path));
    const wrong = await walk(ops, AGENT_A, (op, status) =>
      isAgentRoute(op, B) || isOperatorRoute(op) ? status === 403 : status !== 401 && status !== 403,
    );
    expect(wrong).toEqual([]);
  });

  it('with a read-only token: every change is 403, its own agent still readable', async () => {
    const ops = (await operations(A)).filter((op) => isAgentRoute(op, A) && !(isStream(op) && op.method === 'GET'));
    const wrong = await walk(ops, READER_A, (op, status) =>
      op.method === 'GET' ? status !== 401 && status !== 403 : status === 403,
    );
    expect(wrong).toEqual([]);
    const everyAgent = (await operations(B)).filter((op) => isAgentRoute(op, B) && op.method !== 'GET');
    expect(await walk(everyAgent, READER_ALL, (_op, status) => status === 403)).toEqual([]);
  });

  it('a route added with no check of its own is guarded: 403 for another agent, 200 for its own', async () => {
    expect(await answer({ method: 'GET', path: `/v1/agents/${B}/probe` }, AGENT_A)).toBe(403);
    expect(await answer({ method: 'GET', path: `/v1/agents/${A}/probe` }, AGENT_A)).toBe(200);
    expect(await answer({ method: 'GET', path: `/v1/agents/${B}/probe` }, OPERATOR)).toBe(200);
    expect(await answer({ method: 'GET', path: `/v1/agents/${uniqueId('z')}/probe` })).toBe(401);
  });

  it('a token configured as sha256:<hex> is known by its digest', async () => {
    expect(await answer({ method: 'GET', path: `/v1/agents/${A}/probe` }, BY_DIGEST)).toBe(200);
    expect(await answer({ method: 'GET', path: `/v1/agents/${B}/probe` }, BY_DIGEST)).toBe(403);
    const digestAsToken = `sha256:${createHash('sha256').update(BY_DIGEST).digest('hex')}`;
    expect(await answer({ method: 'GET', path: `/v1/agents/${A}/probe` }, digestAsToken)).toBe(401);
  });

  it('a 403 says what the token may not do', async () => {
    const res = await keel.api.inject({
      method: 'GET',
      url: `/v1/agents/${B}/conversations`,
      headers: { authorization: `Bearer ${AGENT_A}` },
    });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({
      error: { code: 'forbidden', message: `this token is for agent ${A}, not for agent ${B}` },
    });
  });
});
