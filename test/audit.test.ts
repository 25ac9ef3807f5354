import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { propose } from './support/reflection';
import { author, CONTACT_ADA, type RoutineRun } from './support/routines';

// Three tokens: one for the routines agent alone, one for every agent, one for an agent of someone else.
const OPS = 'tok-audit-ops';
const ADMIN = 'tok-audit-admin';
const OTHER = 'tok-audit-other';
// What the trail shows of them, worked out by hand: `printf %s tok-audit-ops | sha256sum`, first 12 hex digits.
const OPS_ID = 'token:aad8a3cd889d';
const ADMIN_ID = 'token:16af729b9be9';

const routinesAgent = uniqueId('audit-r');
let keel: TestKeel; // tokens configured, a worker, reflection that drains at 1 (persona.md waits for approval)
let dev: TestKeel; // no tokens (development mode), no worker
beforeAll(async () => {
  [keel, dev] = await Promise.all([
    startTestKeel({
      tokens: new Map([
        [OPS, routinesAgent],
        [ADMIN, '*'],
        [OTHER, uniqueId('audit-x')],
      ]),
      reflection: { drainAtQueued: 1 },
    }),
    startTestKeel({ worker: false }),
  ]);
});
afterAll(async () => Promise.all([keel, dev].map((k) => k?.stop())));

async function call<T = Record<string, unknown>>(
  k: TestKeel,
  token: string | undefined,
  method: 'GET' | 'POST' | 'PUT',
  url: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const res = await k.api.inject({
    method,
    url,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json<T>() };
}

interface Entry {
  id: number;
  at: string;
  action: string;
  actor: string;
  subject: string;
  detail: unknown;
}
interface Page {
  entries: Entry[];
  nextBefore: number | null;
}

async function trail(k: TestKeel, agentId: string, query = ''): Promise<Page> {
  const res = await call<Page>(k, k === dev ? undefined : ADMIN, 'GET', `/v1/agents/${agentId}/audit${query}`);
  if (res.status !== 200) throw new Error(`audit: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
/** The entries without their id and time, which the test cannot know beforehand. */
const decisions = (p: Page) =>
  p.entries.map(({ action, actor, subject, detail }) => ({ action, actor, subject, detail }));

describe('the audit trail records which token decided, and when', () => {
  it('routine runs: approved by one token, rejected by another; a refused decision is not recorded', async () => {
    const a = routinesAgent;
    const base = `/v1/agents/${a}/apps/crm`;
    const ops = <T = Record<string, unknown>>(method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) =>
      call<T>(keel, OPS, method, url, body);
    expect(
      (await ops('PUT', base, { name: 'crm', tables: [{ name: 'leads', columns: ['name', 'email'] }] })).status,
    ).toBe(200);
    await ops('POST', `${base}/tables/leads/records`, { id: 'l1', name: 'Ada', email: 'ada@example.com' });
    const put = await ops('PUT', `${base}/routines/contact`, {
      label: 'contact',
      schedule: { expr: 'daily' },
      prompt: `Contact Ada ${author(CONTACT_ADA)}`,
    });
    expect(put.status).toBe(201);
    const runs = async () => (await ops<RoutineRun[]>('GET', `${base}/routines/contact/runs`)).body;
    const waitingRun = async (not: string[]) => {
      expect((await ops('POST', `${base}/routines/contact/run`)).status).toBe(202);
      return eventually(
        async () => (await runs()).find((r) => !not.includes(r.runId) && r.status === 'needs_approval'),
        60_000,
        'a run waiting for approval',
      );
    };

    const started = Date.now();
    const first = await waitingRun([]);
    const approved = await ops('POST', `/v1/agents/${a}/routine-runs/${first.runId}/approve`, { note: 'go ahead' });
    expect(approved).toEqual({ status: 202, body: { runId: first.runId, decision: 'approved' } });
    await eventually(async () => (await runs()).find((r) => r.runId === first.runId && r.status === 'ok'), 60_000);

    const second = await waitingRun([first.runId]);
    const rejected = await call(keel, ADMIN, 'POST', `/v1/agents/${a}/routine-runs/${second.runId}/reject`, {
      note: 'not today',
    });
    expect(rejected.status).toBe(202);
    // Deciding again is refused (the run no longer waits): nothing changed, so nothing is recorded.
    const again = await ops<{ error: { code: string } }>(
      'POST',
      `/v1/agents/${a}/routine-runs/${second.runId}/approve`,
    );
    expect(again).toMatchObject({ status: 409, body: { error: { code: 'not_awaiting_approval' } } });

    const page = await trail(keel, a);
    expect(decisions(page)).toEqual([
      { action: 'routine_run.reject', actor: ADMIN_ID, subject: second.runId, detail: { note: 'not today' } },
      { action: 'routine_run.approve', actor: OPS_ID, subject: first.runId, detail: { note: 'go ahead' } },
    ]);
    expect(page.nextBefore).toBeNull();
    for (const e of page.entries) {
      expect(Date.parse(e.at)).toBeGreaterThanOrEqual(started - 1_000);
      expect(Date.parse(e.at)).toBeLessThanOrEqual(Date.now() + 1_000);
    }
    // The tokens themselves are nowhere in the trail.
    for (const token of [OPS, ADMIN]) expect(JSON.stringify(page)).not.toContain(token);

    // The agent's own token reads its trail; another agent's token is refused; no token is unauthorized.
    expect((await ops<Page>('GET', `/v1/agents/${a}/audit`)).body).toEqual(page);
    const foreign = await call(keel, OTHER, 'GET', `/v1/agents/${a}/audit`);
    expect(foreign).toEqual({
      status: 403,
      body: { error: { code: 'forbidden', message: expect.stringContaining(`not for agent ${a}`) as string } },
    });
    expect((await call(keel, undefined, 'GET', `/v1/agents/${a}/audit`)).status).toBe(401);
  });

  it('proposals approved and rejected, then a memory rollback', async () => {
    const a = uniqueId('audit-p');
    const admin = <T = Record<string, unknown>>(method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) =>
      call<T>(keel, ADMIN, method, url, body);
    expect((await admin('PUT', `/v1/agents/${a}`, { name: a, reflection: { enabled: true } })).status).toBe(200);
    const waitingProposal = async (conversationId: string, persona: string) => {
      const turn = await keel.post(
        a,
        conversationId,
        { text: propose([{ file: 'persona.md', content: persona }]) },
        { wait: 30, token: ADMIN },
      );
      expect(turn.body.status).toBe('replied');
      return eventually(
        async () =>
          (
            await admin<{ id: string; status: string; conversationIds: string[] }[]>('GET', `/v1/agents/${a}/proposals`)
          ).body.find((p) => p.conversationIds.includes(conversationId) && p.status === 'awaiting_approval'),
        60_000,
        `a proposal from ${conversationId} waiting for approval`,
      );
    };

    const first = await waitingProposal('c1', '# Persona\n\nYou answer in French.\n');
    const approved = await admin('POST', `/v1/agents/${a}/proposals/${first.id}/approve`, { note: 'yes' });
    expect(approved).toMatchObject({ status: 200, body: { status: 'admitted', version: 2 } });
    const second = await waitingProposal('c2', '# Persona\n\nYou answer in Klingon.\n');
    const rejected = await admin('POST', `/v1/agents/${a}/proposals/${second.id}/reject`);
    expect(rejected).toMatchObject({ status: 200, body: { status: 'rejected' } });
    const rollback = await admin('POST', `/v1/agents/${a}/memory/rollback`, { toVersion: 1 });
    expect(rollback).toMatchObject({ status: 200, body: { version: 3, rollbackOf: 1 } });
    // A rollback refused (no such version) changes nothing and records nothing.
    expect((await admin('POST', `/v1/agents/${a}/memory/rollback`, { toVersion: 99 })).status).toBe(404);

    expect(decisions(await trail(keel, a))).toEqual([
      { action: 'memory.rollback', actor: ADMIN_ID, subject: '3', detail: { toVersion: 1 } },
      { action: 'proposal.reject', actor: ADMIN_ID, subject: second.id, detail: null },
      { action: 'proposal.approve', actor: ADMIN_ID, subject: first.id, detail: { note: 'yes' } },
    ]);
  });

  it('a task approved (pending_approval → ready) by a token; other moves are not approvals', async () => {
    const a = uniqueId('audit-t');
    const created = await call<{ number: number }>(keel, ADMIN, 'POST', `/v1/agents/${a}/tasks`, {
      title: 'Needs a yes',
      status: 'pending_approval',
    });
    expect(created.status).toBe(201);
    const move = (status: string) =>
      keel.api.inject({
        method: 'PATCH',
        url: `/v1/agents/${a}/tasks/${created.body.number}`,
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ status }),
      });
    expect((await move('ready')).statusCode).toBe(200);
    expect((await move('backlog')).statusCode).toBe(200);
    expect((await move('done')).statusCode).toBe(409);
    expect(decisions(await trail(keel, a))).toEqual([
      { action: 'task.approve', actor: ADMIN_ID, subject: `#${created.body.number}`, detail: null },
    ]);
  });

  it('destination changes: owner and named destinations, webhooks by origin; other edits are not one', async () => {
    const a = uniqueId('audit-d');
    const put = async (body: Record<string, unknown>) =>
      expect((await call(keel, ADMIN, 'PUT', `/v1/agents/${a}`, { name: a, ...body })).status).toBe(200);
    const hook = { channel: 'webhook', url: 'https://hooks.example.com/in/T0/B0/pathsecret', secret: 'hook-secret-1' };
    const alerts = { channel: 'slack', target: 'C0ALERTS' };
    await put({});
    await put({ owner: { delivery: hook } });
    // Another setting changed, the same owner (keys in another order): not a destination change.
    await put({ owner: { delivery: { secret: hook.secret, url: hook.url, channel: 'webhook' } }, model: 'other' });
    await put({ owner: { delivery: alerts }, destinations: { ops: hook, alerts } });
    // A rotated secret is a change, though the trail shows neither secret.
    await put({ owner: { delivery: alerts }, destinations: { ops: { ...hook, secret: 'hook-secret-2' } } });
    await put({});

    const page = await trail(keel, a);
    const webhook = { channel: 'webhook', origin: 'https://hooks.example.com', signed: true };
    const slack = { channel: 'slack', target: 'C0ALERTS' };
    const entry = (detail: unknown) => ({ action: 'agent.destinations', actor: ADMIN_ID, subject: a, detail });
    expect(decisions(page)).toEqual([
      entry({
        owner: { from: slack, to: null },
        destinations: { added: {}, removed: ['ops'], changed: {} },
      }),
      entry({
        destinations: { added: {}, removed: ['alerts'], changed: { ops: { from: webhook, to: webhook } } },
      }),
      entry({
        owner: { from: webhook, to: slack },
        destinations: { added: { alerts: slack, ops: webhook }, removed: [], changed: {} },
      }),
      entry({ owner: { from: null, to: webhook } }),
    ]);
    // The webhook's secret and its path (which can be a credential itself) are not in the trail.
    expect(JSON.stringify(page)).not.toMatch(/hook-secret|pathsecret/);
  });

  it("budget changes: the agent's limits before and after, with the token that set them", async () => {
    const a = uniqueId('audit-b');
    const put = async (budgets?: Record<string, number>) =>
      expect(
        (await call(keel, ADMIN, 'PUT', `/v1/agents/${a}`, { name: a, ...(budgets ? { budgets } : {}) })).status,
      ).toBe(200);
    await put();
    await put({ dailyUsd: 5 });
    await put({ dailyUsd: 5 }); // unchanged: no entry
    await put({ dailyUsd: 2, perTurnUsd: 0.5 });
    const entry = (from: unknown, to: unknown) => ({
      action: 'agent.budgets',
      actor: ADMIN_ID,
      subject: a,
      detail: { from, to },
    });
    expect(decisions(await trail(keel, a))).toEqual([
      entry({ dailyUsd: 5 }, { dailyUsd: 2, perTurnUsd: 0.5 }),
      entry({}, { dailyUsd: 5 }),
    ]);
  });
});

describe('the listing', () => {
  it('without tokens the actor is dev; newest first, in pages of `limit` older than `before`', async () => {
    const a = uniqueId('audit-m');
    for (let i = 0; i < 5; i++) {
      const res = await call(dev, undefined, 'POST', `/v1/agents/${a}/memory/rollback`, { toVersion: 1 });
      expect(res.status).toBe(200);
    }
    const all = await trail(dev, a);
    expect(all.entries.map((e) => [e.subject, e.actor])).toEqual([
      ['6', 'dev'],
      ['5', 'dev'],
      ['4', 'dev'],
      ['3', 'dev'],
      ['2', 'dev'],
    ]);
    expect(all.nextBefore).toBeNull();
    expect((await trail(dev, a, '?limit=200')).entries).toHaveLength(5);

    const first = await trail(dev, a, '?limit=2');
    expect(first.entries.map((e) => e.subject)).toEqual(['6', '5']);
    expect(first.nextBefore).toBe(first.entries[1]!.id);
    const second = await trail(dev, a, `?limit=2&before=${first.nextBefore}`);
    expect(second.entries.map((e) => e.subject)).toEqual(['4', '3']);
    const last = await trail(dev, a, `?limit=2&before=${second.nextBefore}`);
    expect(last).toEqual({ entries: [all.entries[4]], nextBefore: null });
    // Exactly a page's worth left: no further page is announced.
    expect((await trail(dev, a, `?limit=4&before=${first.entries[0]!.id}`)).nextBefore).toBeNull();

    expect(await trail(dev, uniqueId('audit-none'))).toEqual({ entries: [], nextBefore: null });
  });

  it('is in the OpenAPI document, with its query and the actions it lists today', async () => {
    const doc = (await dev.api.inject({ method: 'GET', url: '/docs/json' })).json<{
      paths: Record<string, Record<string, { parameters: { name: string; in: string }[] }>>;
    }>();
    const get = doc.paths['/v1/agents/{agentId}/audit']!.get!;
    expect(get.parameters.map((p) => `${p.in}:${p.name}`).sort()).toEqual([
      'path:agentId',
      'query:before',
      'query:limit',
    ]);
    for (const action of ['routine_run.approve', 'proposal.reject', 'memory.rollback', 'agent.destinations'])
      expect(JSON.stringify(get)).toContain(`\`${action}\``);
  });

  it('refuses a bad page in the error shape', async () => {
    for (const query of ['?limit=0', '?limit=201', '?before=abc', '?before=0', '?since=1']) {
      const res = await call<{ error: { code: string; message: string } }>(
        dev,
        undefined,
        'GET',
        `/v1/agents/a1/audit${query}`,
      );
      expect(res.status, query).toBe(400);
      expect(res.body.error.code, query).toBe('invalid_request');
    }
  });
});
