import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeLockName } from '../db/erasure';
import { finishedDeletion, rowsMentioning, type Deletion } from './support/deletions';
import { eventually, startTestKeel, uniqueId, type ApiMethod, type TestKeel } from './support/keel';
import { startShopHttp, type ShopHttp } from './support/mcp-shop';

/**
 * A deletion that nothing races (issue 50, point 2): while an agent's deletion runs, every write to it answers 409
 * being_deleted naming the deletion; a write that began before the deletion was marked lands before the erase, so
 * nothing of the agent's is left behind; afterwards the agent is not there until someone uses it again.
 */
let keel: TestKeel;
let shop: ShopHttp;
beforeAll(async () => {
  keel = await startTestKeel();
  shop = await startShopHttp();
});
afterAll(async () => {
  await keel?.stop();
  await shop?.close();
});

type Answer = { status: number; body: { error?: { code: string; message: string; details?: unknown } } };
const call = async (method: ApiMethod, url: string, body?: unknown): Promise<Answer> => {
  const { status, body: answered } = await keel.call<Answer['body']>(method, url, body);
  return { status, body: answered };
};

/** A proxy to an MCP server that holds every request until it is opened: writes that stay in flight. */
async function heldProxy(target: string) {
  let arrivals = 0;
  const waiting: { n: number; arrived: () => void }[] = [];
  let open = () => undefined as void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const to = new URL(target);
  const server = http.createServer((req, res) => {
    arrivals++;
    for (const w of waiting) if (arrivals >= w.n) w.arrived();
    void opened.then(() => {
      const options = { host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers };
      const upstream = http.request(options, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${to.pathname}`,
    /** Resolves once n requests have arrived (each held write's first, while the proxy holds them). */
    arrived: (n = 1) =>
      arrivals >= n ? Promise.resolve() : new Promise<void>((arrived) => waiting.push({ n, arrived })),
    open,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Whether the agent's deletion waits for the lock its writes hold (PostgreSQL's own view of its locks). */
async function deletionWaitsForWrites(agentId: string): Promise<boolean> {
  const { rows } = await keel.pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_locks
      WHERE locktype = 'advisory' AND objsubid = 1 AND NOT granted
        AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`,
    [writeLockName(agentId)],
  );
  return rows[0]!.n !== '0';
}

/** Whether the deletion still runs. */
async function stillRunning(agentId: string, deletionId: string): Promise<boolean> {
  const got = await keel.call<Deletion>('GET', `/v1/agents/${agentId}/deletions/${deletionId}`);
  return got.body.status === 'running';
}

/** What a refused write answers: 409 being_deleted, naming the deletion in its message and details. */
const refusedBy = (agentId: string, deletionId: string) => ({
  status: 409,
  body: {
    error: {
      code: 'being_deleted',
      message:
        `agent ${agentId} is being deleted (deletion ${deletionId}); it takes writes again once the deletion has ` +
        `finished (GET /v1/agents/${agentId}/deletions/${deletionId})`,
      details: { deletionId, agentId, conversationId: null },
    },
  },
});

/** The tables that keep anything of the agent's but its audit trail and its ledger's keys (without requests). */
async function leftOf(agentId: string): Promise<string[]> {
  const left = Object.keys(await rowsMentioning(keel.pool, agentId)).filter((t) => t !== 'audit_trail');
  const { rows } = await keel.pool.query<{ request: unknown }>(
    'SELECT DISTINCT request FROM effects x WHERE strpos(x::text, $1) > 0',
    [agentId],
  );
  return rows.some((r) => JSON.stringify(r.request) !== '{}') ? left : left.filter((t) => t !== 'effects');
}

describe('a write while its agent is deleted', () => {
  it('is refused naming the deletion; one in flight lands before the erase and goes with it; then none', async () => {
    const agent = uniqueId('del');
    // Reproduction 2 of issue 50, with a tool server's PUT in flight (its MCP server held) as the deletion is asked.
    expect((await call('POST', `/v1/agents/${agent}/tasks`, { title: 't', description: 'd' })).status).toBe(201);
    const held = await heldProxy(shop.url);
    try {
      const inFlight = call('PUT', `/v1/agents/${agent}/tool-servers/late`, { url: held.url });
      await held.arrived();
      const asked = await keel.call<Deletion>('DELETE', `/v1/agents/${agent}`);
      expect(asked.status).toBe(202);
      const { deletionId } = asked.body;
      const patch = await call('PATCH', `/v1/agents/${agent}/tasks/1`, { status: 'pending_approval' });
      expect(patch).toEqual(refusedBy(agent, deletionId));
      // A read answers 404 naming the deletion; the deletion's own status answers.
      expect(await call('GET', `/v1/agents/${agent}/tasks/1`)).toEqual({
        status: 404,
        body: {
          error: {
            code: 'not_found',
            message:
              `agent ${agent} not found: it is being deleted (deletion ${deletionId}; ` +
              `GET /v1/agents/${agent}/deletions/${deletionId})`,
            details: { deletionId, agentId: agent, conversationId: null },
          },
        },
      });
      expect(await stillRunning(agent, deletionId)).toBe(true);
      // The write in flight goes on once the deletion waits for it (without the guard: once it has erased).
      await eventually(
        async () => (await deletionWaitsForWrites(agent)) || !(await stillRunning(agent, deletionId)),
        60_000,
        'the deletion to wait for the write in flight',
      );
      held.open();
      expect((await inFlight).status).toBe(201);

      const done = await finishedDeletion(keel, agent, deletionId);
      // Three rows: the agent's, its task, and the tool server that landed before the erase.
      expect(done).toMatchObject({
        status: 'finished',
        outcome: { conversations: 0, workflowsEnded: 0, schedulesDeleted: 0, rowsErased: 3 },
      });
      expect((await call('GET', `/v1/agents/${agent}`)).status).toBe(404);
      expect((await call('GET', `/v1/agents/${agent}/tasks/1`)).status).toBe(404);
      expect((await call('GET', `/v1/agents/${agent}/tool-servers/late`)).status).toBe(404);
      expect(await leftOf(agent)).toEqual([]);
    } finally {
      held.open();
      await held.close();
    }
    // Written to again on purpose, it comes into being anew.
    expect((await call('PUT', `/v1/agents/${agent}`, { name: 'again' })).status).toBe(200);
    expect((await keel.call<{ name: string }>('GET', `/v1/agents/${agent}`)).body.name).toBe('again');
  });

  it("to a conversation being deleted is refused naming that deletion; the agent's other writes go on", async () => {
    const agent = uniqueId('conv');
    const base = `/v1/agents/${agent}`;
    expect((await keel.post(agent, 'other', { text: 'hello' }, { wait: 30 })).status).toBe(200);
    // A submission that waits for its slow turn: a write to the conversation still under way as its deletion is asked.
    const waiting = keel.post(agent, 'gone', { text: '/delay 8000 slow' }, { wait: 30 });
    await eventually(async () => (await call('GET', `${base}/conversations/gone`)).status === 200, 30_000);
    const asked = await keel.call<Deletion>('DELETE', `${base}/conversations/gone`);
    expect(asked.status).toBe(202);
    const { deletionId } = asked.body;
    expect(await call('POST', `${base}/conversations/gone/messages`, { text: 'too late' })).toEqual({
      status: 409,
      body: {
        error: {
          code: 'being_deleted',
          message:
            `conversation gone is being deleted (deletion ${deletionId}); it takes writes again once the deletion ` +
            `has finished (GET ${base}/deletions/${deletionId})`,
          details: { deletionId, agentId: agent, conversationId: 'gone' },
        },
      },
    });
    expect((await call('GET', `${base}/conversations/gone`)).status).toBe(404);
    // Asked again, the DELETE answers the same deletion.
    expect((await keel.call<Deletion>('DELETE', `${base}/conversations/gone`)).body.deletionId).toBe(deletionId);
    expect((await call('POST', `${base}/conversations/other/messages`, { text: 'still here' })).status).toBe(202);
    expect((await call('POST', `${base}/tasks`, { title: 't', description: 'd' })).status).toBe(201);
    // The submission that came first gets its answer; then the deletion goes on.
    expect((await waiting).body).toMatchObject({ status: 'replied', reply: { text: 'echo: slow' } });
    expect(await finishedDeletion(keel, agent, deletionId)).toMatchObject({
      status: 'finished',
      conversationId: 'gone',
      outcome: { conversations: 1 },
    });
    expect((await call('GET', `${base}/conversations/gone`)).status).toBe(404);
    expect((await call('GET', `${base}/conversations/other`)).status).toBe(200);
  });

  it("to a fork of a conversation being deleted is refused naming the source's deletion; it goes too", async () => {
    const agent = uniqueId('fork');
    const base = `/v1/agents/${agent}`;
    expect((await keel.post(agent, 'src', { text: 'hello' }, { wait: 30 })).status).toBe(200);
    const forked = await keel.call<{ conversationId: string }>('POST', `${base}/conversations/src/forks`, {
      atTurn: 1,
    });
    expect(forked.status, forked.raw).toBe(201);
    const fork = forked.body.conversationId;
    // A slow turn of the source's, waited for: its deletion stays running while the fork is written to.
    const waiting = keel.post(agent, 'src', { text: '/delay 8000 slow' }, { wait: 30 });
    await eventually(async () => (await call('GET', `${base}/conversations/src`)).status === 200, 30_000);
    const asked = await keel.call<Deletion>('DELETE', `${base}/conversations/src`);
    expect(asked.status).toBe(202);
    const { deletionId } = asked.body;
    const refused = await call('POST', `${base}/conversations/${fork}/messages`, { text: 'too late' });
    expect(refused).toMatchObject({
      status: 409,
      body: { error: { code: 'being_deleted', details: { deletionId, agentId: agent, conversationId: 'src' } } },
    });
    expect((await call('GET', `${base}/conversations/${fork}`)).status).toBe(404);
    expect((await waiting).body).toMatchObject({ status: 'replied' });
    expect(await finishedDeletion(keel, agent, deletionId)).toMatchObject({ status: 'finished' });
    expect((await call('GET', `${base}/conversations/${fork}`)).status).toBe(404);
  });

  it('of every kind, 20 each before, during and after the DELETE: each lands or is refused; none remains', async () => {
    const agent = uniqueId('race');
    const base = `/v1/agents/${agent}`;
    // What the writes build on: the agent, a conversation with a finished turn, an app, and tasks to move.
    expect((await call('PUT', base, { name: agent })).status).toBe(200);
    expect((await keel.post(agent, 'c0', { text: 'first' }, { wait: 30 })).body.status).toBe('replied');
    const app = { name: 'crm', tables: [{ name: 'leads', columns: ['name', 'email'] }] };
    expect((await call('PUT', `${base}/apps/crm`, app)).status).toBe(200);
    for (let i = 1; i <= 20; i++)
      expect((await call('POST', `${base}/tasks`, { title: `t${i}`, description: 'd' })).status).toBe(201);

    // The tool servers written before the DELETE are held in flight (their MCP server held) until the deletion waits.
    const held = await heldProxy(shop.url);
    const kinds: Record<string, { ok: number; write: (i: number) => Promise<Answer> }> = {
      message: { ok: 202, write: (i) => call('POST', `${base}/conversations/m${i}/messages`, { text: `hi ${i}` }) },
      task: { ok: 201, write: (i) => call('POST', `${base}/tasks`, { title: `new ${i}`, description: 'd' }) },
      taskMove: { ok: 200, write: (i) => call('PATCH', `${base}/tasks/${i + 1}`, { status: 'pending_approval' }) },
      job: {
        ok: 201,
        write: (i) =>
          call('POST', `${base}/jobs`, {
            name: `job-${i}`,
            schedule: { kind: 'every', intervalMs: 3_600_000 },
            task: 'digest',
          }),
      },
      routine: {
        ok: 201,
        write: (i) => call('PUT', `${base}/apps/crm/routines/r${i}`, { label: `r${i}`, schedule: { expr: 'daily' } }),
      },
      app: { ok: 200, write: (i) => call('PUT', `${base}/apps/app${i}`, app) },
      record: {
        ok: 201,
        write: (i) => call('POST', `${base}/apps/crm/tables/leads/records`, { id: `l${i}`, name: 'Ada', email: 'a@x' }),
      },
      toolServer: {
        ok: 201,
        write: (i) => call('PUT', `${base}/tool-servers/s${i}`, { url: i < 7 ? held.url : shop.url }),
      },
      memory: { ok: 200, write: () => call('POST', `${base}/memory/rollback`, { toVersion: 1 }) },
      evaluation: {
        ok: 202,
        write: () => call('POST', `${base}/evals`, { mode: 'replay', recorded: { conversationIds: ['c0'] } }),
      },
      fork: { ok: 201, write: () => call('POST', `${base}/conversations/c0/forks`, { atTurn: 1 }) },
      skill: { ok: 200, write: (i) => call('PUT', `${base}/skills/skill-${i}`, { body: 'Be brief.' }) },
      agent: { ok: 200, write: (i) => call('PUT', base, { name: `name ${i}` }) },
    };
    type When = 'before' | 'during' | 'after';
    const sent: { kind: string; when: When; answer: Promise<Answer> }[] = [];
    const send = (when: When, from: number, to: number) => {
      for (let i = from; i < to; i++)
        for (const [kind, k] of Object.entries(kinds)) sent.push({ kind, when, answer: k.write(i) });
    };
    let deletionId = '';
    try {
      send('before', 0, 7);
      await held.arrived(7);
      const asking = keel.call<Deletion>('DELETE', base);
      send('during', 7, 14);
      const asked = await asking;
      expect(asked.status).toBe(202);
      deletionId = asked.body.deletionId;
      send('after', 14, 20);
      await eventually(
        async () => (await deletionWaitsForWrites(agent)) || !(await stillRunning(agent, deletionId)),
        60_000,
        'the deletion to wait for the writes in flight',
      );
    } finally {
      held.open();
    }
    const answers = await Promise.all(sent.map(async (s) => ({ ...s, answer: await s.answer })));
    await held.close();

    const unexpected = answers.filter((a) => a.answer.status !== kinds[a.kind]!.ok && a.answer.status !== 409);
    expect(unexpected.map((a) => [a.kind, a.when, a.answer])).toEqual([]);
    for (const a of answers.filter((x) => x.answer.status === 409))
      expect(a.answer).toEqual(refusedBy(agent, deletionId));
    const statuses = (when: When, kind?: string) =>
      answers.filter((a) => a.when === when && (!kind || a.kind === kind)).map((a) => a.answer.status);
    // Held past the guard before the DELETE, the tool servers land; whatever is sent once it answered is refused.
    expect(statuses('before', 'toolServer')).toEqual(Array<number>(7).fill(201));
    expect(statuses('after')).toEqual(Array<number>(6 * Object.keys(kinds).length).fill(409));

    const done = await finishedDeletion(keel, agent, deletionId);
    expect(done.status).toBe('finished');
    // What landed before the mark is what the deletion counts: each message's and fork's conversation, each Schedule.
    const landed = (kind: string) => answers.filter((a) => a.kind === kind && a.answer.status !== 409).length;
    expect(done.outcome).toMatchObject({
      conversations: 1 + landed('message') + landed('fork'),
      schedulesDeleted: landed('job') + landed('routine'),
    });
    expect(await leftOf(agent)).toEqual([]);
    expect((await call('GET', base)).status).toBe(404);
  });
});
