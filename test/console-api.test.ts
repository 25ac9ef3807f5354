import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { propose, reflectionApi } from './support/reflection';
import { author, CONTACT_ADA, finished, routineApi } from './support/routines';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

// Waits of the worker's own length, not the 7-day defaults: the approvals list must say what the worker waits.
const ROUTINE_WAIT_MS = 2 * 3_600_000;
const PROPOSAL_WAIT_MS = 3 * 3_600_000;
const HOOK_SECRET = 'a plain secret';
/** The first 8 hex characters of SHA-256(HOOK_SECRET): how answers tell the secret apart without showing it. */
const SECRET_FINGERPRINT = '4f898257';

let keel: TestKeel; // a worker; API without tokens (every agent)
let secured: TestKeel; // the same database through an API with tokens, no worker
let hook: WebhookReceiver;
const [agentA, agentB] = [uniqueId('a'), uniqueId('b')];
const TOKENS = { a: 'token-for-a', b: 'token-for-b', operator: 'token-for-all' };

beforeAll(async () => {
  [keel, secured, hook] = await Promise.all([
    startTestKeel({
      routines: { approvalWaitMs: ROUTINE_WAIT_MS },
      reflection: { drainAtQueued: 1, approvalWaitMs: PROPOSAL_WAIT_MS },
    }),
    startTestKeel({
      worker: false,
      tokens: new Map([
        [TOKENS.a, agentA],
        [TOKENS.b, agentB],
        [TOKENS.operator, '*'],
      ]),
    }),
    startWebhookReceiver(),
  ]);
});
afterAll(async () => {
  await Promise.all([keel?.stop(), secured?.stop(), hook?.close()]);
});

interface ApiError {
  error: { code: string; message: string };
}
interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

async function api<T = Record<string, unknown>>(
  method: 'GET' | 'POST' | 'PUT',
  url: string,
  opts: { body?: unknown; token?: string; via?: TestKeel } = {},
): Promise<{ status: number; body: T }> {
  const res = await (opts.via ?? keel).api.inject({
    method,
    url,
    headers: {
      ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
    },
    ...(opts.body === undefined ? {} : { payload: JSON.stringify(opts.body) }),
  });
  return { status: res.statusCode, body: res.json<T>() };
}

const get = <T>(url: string, opts: { token?: string; via?: TestKeel } = {}) => api<T>('GET', url, opts);
const withQuery = (url: string, query: string) => `${url}${url.includes('?') ? '&' : '?'}${query}`;

/** Every item of a list, following nextCursor page by page. */
async function allPages<T>(url: string, opts: { token?: string; via?: TestKeel } = {}): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const page: { status: number; body: Page<T> } = await get<Page<T>>(
      cursor ? withQuery(url, `cursor=${cursor}`) : url,
      opts,
    );
    expect(page.status).toBe(200);
    items.push(...page.body.items);
    cursor = page.body.nextCursor;
  } while (cursor);
  return items;
}

const anInstant = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as string;
const aString = expect.any(String) as string;
const cursorOf = (key: unknown) => Buffer.from(JSON.stringify(key)).toString('base64url');

describe('GET /v1/agents/:agentId/conversations', () => {
  it('lists conversations by last activity, two a page, with their last turn; q filters by id', async () => {
    const a = uniqueId('a');
    for (const c of ['alpha-1', 'alpha-2', 'beta_1']) {
      const res = await keel.post(a, c, { text: `hello ${c}` }, { wait: 30 });
      expect(res.body.status).toBe('replied');
    }
    const url = `/v1/agents/${a}/conversations`;
    const first = await get<Page<Record<string, unknown>>>(`${url}?limit=2`);
    expect(first.status).toBe(200);
    expect(first.body.items.map((c) => c.conversationId)).toEqual(['beta_1', 'alpha-2']);
    expect(first.body.nextCursor).toEqual(aString);
    expect(first.body.items[0]).toEqual({
      conversationId: 'beta_1',
      workflowId: `conv:${a}:beta_1`,
      lastActivityAt: anInstant,
      turns: 1,
      lastTurn: {
        turnId: aString,
        status: 'replied',
        messageText: 'hello beta_1',
        replyText: 'echo: hello beta_1',
        deliveryOutcome: 'skipped:channel_none',
        finishedAt: anInstant,
      },
    });
    const second = await get<Page<{ conversationId: string }>>(`${url}?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body).toEqual({ items: [expect.objectContaining({ conversationId: 'alpha-1' })], nextCursor: null });

    // A new turn makes a conversation the most recent; its texts are cut to 200 characters.
    const long = 'x'.repeat(250);
    expect((await keel.post(a, 'alpha-1', { text: long }, { wait: 30 })).body.status).toBe('replied');
    const after = await get<Page<{ conversationId: string; turns: number; lastTurn: Record<string, string> }>>(url);
    expect(after.body.items.map((c) => [c.conversationId, c.turns])).toEqual([
      ['alpha-1', 2],
      ['beta_1', 1],
      ['alpha-2', 1],
    ]);
    expect(after.body.items[0]!.lastTurn.messageText).toBe('x'.repeat(200));
    expect(after.body.items[0]!.lastTurn.replyText).toBe(`echo: ${'x'.repeat(194)}`);

    // Ignoring case; `_` is a character like any other, not LIKE's wildcard.
    const alpha = await get<Page<{ conversationId: string }>>(`${url}?q=ALPHA`);
    expect(alpha.body.items.map((c) => c.conversationId)).toEqual(['alpha-1', 'alpha-2']);
    const underscore = await get<Page<{ conversationId: string }>>(`${url}?q=_`);
    expect(underscore.body.items.map((c) => c.conversationId)).toEqual(['beta_1']);
    const none = await get<Page<unknown>>(`${url}?q=${encodeURIComponent('%')}`);
    expect(none.body).toEqual({ items: [], nextCursor: null });
  });
});

describe('GET /v1/agents/:agentId/delegates', () => {
  it('lists delegates newest first, as GET …/delegates/:id shows each, filtered by status', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const spawn = async (text: string) => {
      const res = await keel.post(a, c, { text: `/tool spawn_delegate ${JSON.stringify({ text })}` }, { wait: 30 });
      const id = /spawned delegate (\S+)/.exec(res.body.reply?.text ?? '')?.[1];
      if (!id) throw new Error(`no delegate spawned: ${JSON.stringify(res.body)}`);
      return id;
    };
    const slow = await spawn('/delay 120000 slow work');
    const quick1 = await spawn('quick one');
    const quick2 = await spawn('quick two');
    const url = `/v1/agents/${a}/delegates`;
    const ids = async (query: string) =>
      (await allPages<{ delegateId: string }>(`${url}?${query}`)).map((d) => d.delegateId);
    // Ended and admitted by the conversation: a delegate admitted between the list's read and its own would differ.
    const admitted = async () =>
      (await allPages<{ admittedAt?: string }>(`${url}?status=completed`)).filter((d) => d.admittedAt).length;
    await eventually(async () => (await admitted()) === 2, 30_000, 'two quick delegates to end and be admitted');

    const first = await get<Page<{ delegateId: string }>>(`${url}?limit=2`);
    expect(first.body.items.map((d) => d.delegateId)).toEqual([quick2, quick1]);
    expect(first.body.nextCursor).toEqual(aString);
    const second = await get<Page<{ delegateId: string }>>(`${url}?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.items.map((d) => d.delegateId)).toEqual([slow]);
    expect(second.body.nextCursor).toBeNull();
    // The very view of GET …/delegates/:id.
    for (const d of [...first.body.items, ...second.body.items])
      expect(d).toEqual((await get(`${url}/${d.delegateId}`)).body);

    expect(await ids('status=live')).toEqual([slow]);
    expect(await ids('status=completed')).toEqual([quick2, quick1]);
    expect(await ids('status=success')).toEqual([quick2, quick1]);
    expect(await ids('status=cancelled')).toEqual([]);

    const cancel = await api('POST', `${url}/${slow}/cancel`, { body: { reason: 'not needed' } });
    expect(cancel.status).toBe(202);
    await eventually(async () => (await ids('status=cancelled')).length === 1, 30_000, 'the cancel');
    expect(await ids('status=cancelled')).toEqual([slow]);
    expect(await ids('status=live')).toEqual([]);

    const unknown = await get<ApiError>(`${url}?status=done`);
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.code).toBe('invalid_request');
    for (const allowed of ['live', 'completed', 'success', 'partial', 'timeout', 'blocked', 'cancelled', 'failed'])
      expect(unknown.body.error.message).toContain(allowed);
  });
});

describe('GET /v1/agents/:agentId/apps/:appId/routines', () => {
  it("lists the app's routines by slug, as GET …/routines/:slug shows each; an unknown app is 404", async () => {
    const a = uniqueId('a');
    const r = routineApi(() => keel);
    await r.app(a, 'crm', []);
    for (const slug of ['weekly', 'daily-digest', 'triage']) {
      const put = await r.routine(a, 'crm', slug, {
        label: `Routine ${slug}`,
        prompt: author({ name: 'noop', code: "async function noop() { return 'ok'; }" }),
      });
      expect(put.status).toBe(201);
    }
    const url = `/v1/agents/${a}/apps/crm/routines`;
    const first = await get<Page<{ slug: string }>>(`${url}?limit=2`);
    expect(first.body.items.map((x) => x.slug)).toEqual(['daily-digest', 'triage']);
    const second = await get<Page<{ slug: string }>>(`${url}?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body).toEqual({ items: [expect.objectContaining({ slug: 'weekly' })], nextCursor: null });
    for (const x of [...first.body.items, ...second.body.items])
      expect(x).toEqual((await get(`${url}/${x.slug}`)).body);
    expect(first.body.items[0]).toMatchObject({ label: 'Routine daily-digest', status: 'active', cron: '0 9 * * *' });

    const missing = await get<ApiError>(`/v1/agents/${a}/apps/nope/routines`);
    expect(missing).toEqual({ status: 404, body: { error: { code: 'not_found', message: 'app nope not found' } } });
  });
});

interface RoutineApproval {
  kind: 'routine_run';
  agentId: string;
  id: string;
  waitingSince: string;
  expiresAt: string;
  approve: { method: string; path: string };
}
interface ProposalApproval {
  kind: 'proposal';
  agentId: string;
  id: string;
  waitingSince: string;
  expiresAt: string;
  approve: { method: string; path: string };
}
type Approval = RoutineApproval | ProposalApproval;
/** Other test files' approvals may share the database: only this file's agents are compared. */
const mine = (items: Approval[]) => items.filter((x) => x.agentId === agentA || x.agentId === agentB);

describe('pending approvals', () => {
  const PERSONA = '# Persona\n\nYou answer in haiku.\n';
  let run: { runId: string; firedAt: string; gate?: { detail: string } };
  let proposal: { id: string; checks: unknown[]; tier: string };
  let defaultPersona: string;

  beforeAll(async () => {
    // Agent A: a routine run stopped at its send gate; agent B, a moment later: a proposal touching persona.md.
    const r = routineApi(() => keel);
    await r.app(agentA, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
    await r.routine(agentA, 'crm', 'contact', {
      label: 'Contact Ada',
      prompt: `Contact Ada ${author(CONTACT_ADA)}`,
      delivery: { channel: 'webhook', url: hook.url, secret: HOOK_SECRET },
    });
    const waiting = await r.runNow(agentA, 'crm', 'contact', (x) => x.status === 'needs_approval');
    const { firedAt } = (await get<{ firedAt: string }>(`/v1/agents/${agentA}/routine-runs/${waiting.runId}`)).body;
    run = { ...waiting, firedAt };

    const reflection = reflectionApi(() => keel);
    await reflection.agent(agentB);
    defaultPersona = (await reflection.memory(agentB)).files['persona.md']!;
    await reflection.say(agentB, 'c1', propose([{ file: 'persona.md', content: PERSONA }]));
    const p = await reflection.nthProposal(agentB, 1);
    expect(p.status).toBe('awaiting_approval');
    proposal = (await get<{ id: string; checks: unknown[]; tier: string }[]>(`/v1/agents/${agentB}/proposals`))
      .body[0]!;
  });

  const routineItem = () => ({
    kind: 'routine_run',
    agentId: agentA,
    id: run.runId,
    appId: 'crm',
    slug: 'contact',
    label: 'Contact Ada',
    gate: {
      capability: 'send',
      detail: run.gate!.detail,
      target: { channel: 'webhook', url: hook.url, hasSecret: true, secretFingerprint: SECRET_FINGERPRINT },
    },
    waitingSince: anInstant,
    expiresAt: anInstant,
    approve: { method: 'POST', path: `/v1/agents/${agentA}/routine-runs/${run.runId}/approve` },
    reject: { method: 'POST', path: `/v1/agents/${agentA}/routine-runs/${run.runId}/reject` },
  });
  const proposalItem = () => ({
    kind: 'proposal',
    agentId: agentB,
    id: proposal.id,
    reason: 'waiting for approval of persona.md',
    changes: [{ file: 'persona.md', action: 'edit', summary: 's', rationale: 'r', conversationIds: [] }],
    conversationIds: ['c1'],
    baseVersion: 1,
    tier: 'claude-haiku-4-5',
    checks: proposal.checks,
    files: [{ path: 'persona.md', before: defaultPersona, after: PERSONA }],
    waitingSince: anInstant,
    expiresAt: anInstant,
    approve: { method: 'POST', path: `/v1/agents/${agentB}/proposals/${proposal.id}/approve` },
    reject: { method: 'POST', path: `/v1/agents/${agentB}/proposals/${proposal.id}/reject` },
  });

  it("an agent's list: the routine run at its gate and the proposal, with the waits the worker set", async () => {
    const ofA = await get<Page<RoutineApproval>>(`/v1/agents/${agentA}/approvals`);
    expect(ofA).toEqual({ status: 200, body: { items: [routineItem()], nextCursor: null } });
    const r = ofA.body.items[0]!;
    expect(Date.parse(r.waitingSince)).toBeGreaterThanOrEqual(Date.parse(run.firedAt));
    expect(Date.parse(r.expiresAt) - Date.parse(r.waitingSince)).toBe(ROUTINE_WAIT_MS);

    const ofB = await get<Page<ProposalApproval>>(`/v1/agents/${agentB}/approvals`);
    expect(ofB).toEqual({ status: 200, body: { items: [proposalItem()], nextCursor: null } });
    const p = ofB.body.items[0]!;
    expect(Date.parse(p.expiresAt) - Date.parse(p.waitingSince)).toBe(PROPOSAL_WAIT_MS);
    expect(Date.parse(p.waitingSince)).toBeGreaterThan(Date.parse(r.waitingSince));
  });

  it("every agent's list, oldest first, by pages; tokens: one agent's gets 403, an operator's sees both", async () => {
    const first = await get<Page<Approval>>('/v1/approvals?limit=1');
    expect(first.body.items).toHaveLength(1);
    expect(first.body.nextCursor).toEqual(aString);
    expect(mine(await allPages<Approval>('/v1/approvals?limit=1'))).toEqual([routineItem(), proposalItem()]);

    const operator = await allPages<Approval>('/v1/approvals', { token: TOKENS.operator, via: secured });
    expect(mine(operator)).toEqual([routineItem(), proposalItem()]);

    const refused = await get<ApiError>('/v1/approvals', { token: TOKENS.a, via: secured });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('forbidden');
    expect(refused.body.error.message).toMatch(/for operators' tokens.*use GET \/v1\/agents\/:agentId\/approvals/);

    const own = await get<Page<Approval>>(`/v1/agents/${agentA}/approvals`, { token: TOKENS.a, via: secured });
    expect(own.body.items).toEqual([routineItem()]);
    for (const url of [
      `/v1/agents/${agentB}/approvals`,
      `/v1/agents/${agentB}/conversations`,
      `/v1/agents/${agentB}/delegates`,
      `/v1/agents/${agentB}/apps/crm/routines`,
    ]) {
      const other = await get<ApiError>(url, { token: TOKENS.a, via: secured });
      expect([url, other.status, other.body.error.code]).toEqual([url, 403, 'forbidden']);
    }
    expect((await get(`/v1/agents/${agentA}/apps/crm/routines`, { token: TOKENS.a, via: secured })).status).toBe(200);
  });

  it('approving through the returned paths takes each off the list; the run sends, the proposal applies', async () => {
    const [r] = (await get<Page<RoutineApproval>>(`/v1/agents/${agentA}/approvals`)).body.items;
    const decided = await api(r!.approve.method as 'POST', r!.approve.path, { body: { note: 'from the console' } });
    expect(decided).toEqual({ status: 202, body: { runId: run.runId, decision: 'approved' } });
    await eventually(
      async () => (await get<Page<unknown>>(`/v1/agents/${agentA}/approvals`)).body.items.length === 0,
      30_000,
      'the run off the list',
    );
    const done = await routineApi(() => keel).waitForRun(
      agentA,
      'crm',
      'contact',
      (x) => x.runId === run.runId && finished(x),
      'the approved run to finish',
    );
    expect(done.status).toBe('ok');
    expect(hook.received.filter((x) => (x.body as { agentId?: string }).agentId === agentA)).toHaveLength(1);

    const [p] = (await get<Page<ProposalApproval>>(`/v1/agents/${agentB}/approvals`)).body.items;
    const applied = await api<{ status: string; version: number }>('POST', p!.approve.path);
    expect(applied).toMatchObject({ status: 200, body: { status: 'admitted', version: 2 } });
    expect((await get<Page<unknown>>(`/v1/agents/${agentB}/approvals`)).body).toEqual({ items: [], nextCursor: null });
    expect(mine(await allPages<Approval>('/v1/approvals'))).toEqual([]);
  });
});

describe("a job's conversation, from the list", () => {
  it('opens by its sched: id, and a client still cannot post to it', async () => {
    const a = uniqueId('j');
    const job = await api<{ id: string }>('POST', `/v1/agents/${a}/jobs`, {
      body: { name: 'digest', schedule: { kind: 'every', intervalMs: 3_600_000 }, task: 'digest' },
    });
    expect(job.status).toBe(201);
    expect((await api('POST', `/v1/agents/${a}/jobs/${job.body.id}/run`)).status).toBe(202);
    const listed = await eventually(
      async () =>
        (
          await get<Page<{ conversationId: string; lastTurn: { status: string } | null }>>(
            `/v1/agents/${a}/conversations`,
          )
        ).body.items.find((c) => c.lastTurn?.status === 'replied'),
      60_000,
      "the job's turn",
    );
    expect(listed.conversationId).toBe(`sched:${job.body.id}`);
    const opened = await get<{ conversationId: string; messages: unknown[] }>(
      `/v1/agents/${a}/conversations/${listed.conversationId}`,
    );
    expect(opened.status).toBe(200);
    expect(opened.body.conversationId).toBe(listed.conversationId);
    expect(opened.body.messages.length).toBeGreaterThan(0);
    const posted = await api<ApiError>('POST', `/v1/agents/${a}/conversations/${listed.conversationId}/messages`, {
      body: { text: 'hi' },
    });
    expect([posted.status, posted.body.error.code]).toEqual([400, 'invalid_request']);
  });
});

describe('GET /v1/agents/:agentId/tasks', () => {
  it("lists the agent's task board in number order, two a page; a cursor it did not give is 400", async () => {
    const a = uniqueId('t');
    for (const title of ['First', 'Second', 'Third'])
      expect((await api('POST', `/v1/agents/${a}/tasks`, { body: { title } })).status).toBe(201);
    const first = await get<Page<{ number: number; title: string }>>(`/v1/agents/${a}/tasks?limit=2`);
    expect(first.body.items.map((t) => [t.number, t.title])).toEqual([
      [1, 'First'],
      [2, 'Second'],
    ]);
    const second = await get<Page<{ number: number }>>(
      `/v1/agents/${a}/tasks?limit=2&cursor=${encodeURIComponent(first.body.nextCursor!)}`,
    );
    expect(second.body).toEqual({ items: [expect.objectContaining({ number: 3, title: 'Third' })], nextCursor: null });
    for (const cursor of ['not a cursor!', cursorOf(['c1']), cursorOf([0])]) {
      const res = await get<ApiError>(`/v1/agents/${a}/tasks?cursor=${encodeURIComponent(cursor)}`);
      expect([res.status, res.body.error.code]).toEqual([400, 'invalid_cursor']);
    }
    expect((await get<ApiError>(`/v1/agents/${a}/tasks?limit=101`)).status).toBe(400);
  });
});

describe('bad paging input', () => {
  const lists = () => [
    `/v1/agents/${agentA}/conversations`,
    `/v1/agents/${agentA}/delegates`,
    `/v1/agents/${agentA}/apps/crm/routines`,
    `/v1/agents/${agentA}/approvals`,
    '/v1/approvals',
  ];

  it('a cursor this API did not give → 400 invalid_cursor in the error shape, on every list', async () => {
    const cursors = [
      'not a cursor!',
      'bm90LWpzb24', // base64url of "not-json"
      cursorOf([42]),
      cursorOf({ at: '2025-01-01T00:00:00.000000Z' }),
      cursorOf(['2025-13-45T00:00:00.000000Z', 'c1']),
      cursorOf(['2025-02-30T00:00:00.000000Z', 'c1']),
      cursorOf(['0000-01-01T00:00:00.000000Z', 'c1']),
      cursorOf(['2025-01-01T00:00:00.000000Z', 'a\u0000b']),
      'A'.repeat(3000),
    ];
    for (const url of lists())
      for (const cursor of cursors) {
        const res = await get<ApiError>(withQuery(url, `cursor=${encodeURIComponent(cursor)}`));
        expect([url, cursor, res.status, res.body]).toEqual([
          url,
          cursor,
          400,
          {
            error: {
              code: 'invalid_cursor',
              message: expect.stringContaining('cursor is not one this API gave') as string,
            },
          },
        ]);
      }
  });

  it('limit 0 or 101 → 400 invalid_request; an unknown query parameter → 400', async () => {
    for (const url of lists())
      for (const query of ['limit=0', 'limit=101', 'limit=ten', 'page=2']) {
        const res = await get<ApiError>(withQuery(url, query));
        expect([url, query, res.status, res.body.error.code]).toEqual([url, query, 400, 'invalid_request']);
      }
  });

  it('the OpenAPI document describes every list with its errors', async () => {
    const doc = (await get<{ paths: Record<string, { get?: { tags: string[]; responses: object } }> }>('/docs/json'))
      .body;
    for (const [path, errors] of [
      ['/v1/agents/{agentId}/conversations', ['400', '401', '404']],
      ['/v1/agents/{agentId}/delegates', ['400', '401', '404']],
      ['/v1/agents/{agentId}/apps/{appId}/routines', ['400', '401', '404']],
      ['/v1/agents/{agentId}/approvals', ['400', '401', '404']],
      ['/v1/approvals', ['400', '401', '403']],
    ] as const) {
      const op = doc.paths[path]?.get;
      expect(op?.tags, path).toHaveLength(1);
      expect(Object.keys(op?.responses ?? {}), path).toEqual(expect.arrayContaining(['200', ...errors]));
    }
  });
});
