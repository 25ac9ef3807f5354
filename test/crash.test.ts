import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { migrate } from '../db/migrate';
import { conversationWorkflowId, delegateWorkflowId, jobConversationId } from '../domain/ids';
import { startPostgresProcess, type PostgresProcess } from '../scripts/postgres-process';
import { stopProcess } from '../scripts/processes';
import { eventually, startTestKeel, streamedChars, streamingText, uniqueId, type TestKeel } from './support/keel';
import { freePort } from '../scripts/ports';
import { propose, reflectionApi } from './support/reflection';
import { author, CONTACT_ADA, contactRecords, finished, routineApi } from './support/routines';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';
import { quiescent } from './support/quiescence';
import { startWorkerProcess as spawnWorker } from './support/workers';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
let hook: WebhookReceiver;
afterAll(async () => hook?.close());

async function turnStatus(keel: TestKeel, turnId: string): Promise<string | undefined> {
  const { rows } = await keel.pool.query<{ status: string }>('SELECT status FROM turns WHERE turn_id = $1', [turnId]);
  return rows[0]?.status;
}

async function transcriptRoles(keel: TestKeel, conversationKey: string): Promise<string[]> {
  const { rows } = await keel.pool.query<{ role: string }>(
    'SELECT role FROM messages WHERE conversation_key = $1 ORDER BY seq',
    [conversationKey],
  );
  return rows.map((r) => r.role);
}

/** A worker process of its own on the test Keel's task queue, stopped after the test. */
function startWorkerProcess(keel: TestKeel, databaseUrl: string, env: Record<string, string> = {}): ChildProcess {
  const child = spawnWorker(keel, databaseUrl, env);
  cleanups.push(() => stopProcess(child));
  return child;
}

describe('a crash mid-turn loses nothing and doubles nothing', () => {
  it('kill -9 of the worker in a /delay 5000 turn: restarted, it completes and the webhook hears it once', async () => {
    hook ??= await startWebhookReceiver();
    const keel = await startTestKeel({ worker: false });
    cleanups.push(() => keel.stop());
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);

    const worker = startWorkerProcess(keel, inject('databaseUrl'));
    const posted = await keel.post(a, c, {
      text: '/delay 5000 survived the crash',
      delivery: { channel: 'webhook', url: hook.url },
    });
    expect(posted.status).toBe(202);
    await streamingText(keel.pool, key, 60_000);

    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGKILL');
    await exited;
    expect(await turnStatus(keel, posted.body.turnId)).toBe('running');

    startWorkerProcess(keel, inject('databaseUrl'));
    await eventually(
      async () => (await turnStatus(keel, posted.body.turnId)) === 'replied',
      90_000,
      'the turn to be replied',
    );

    const mine = hook.received.filter((r) => (r.body as { conversationId?: string }).conversationId === c);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.body).toMatchObject({ text: 'echo: survived the crash', turnId: posted.body.turnId });
    expect(await transcriptRoles(keel, key)).toEqual(['user', 'assistant', 'tool']);
    const { rows } = await keel.pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM turns WHERE conversation_key = $1',
      [key],
    );
    expect(Number(rows[0]!.n)).toBe(1);
  });

  it('kill -9 of the worker while a delegate runs: restarted, it finishes and its result is relayed once', async () => {
    hook ??= await startWebhookReceiver();
    const keel = await startTestKeel({ worker: false });
    cleanups.push(() => keel.stop());
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const worker = startWorkerProcess(keel, inject('databaseUrl'));
    const spawned = await keel.post(
      a,
      c,
      {
        text: '/tool spawn_delegate {"text":"/delay 5000 survived","historyMode":"clean"}',
        delivery: { channel: 'webhook', url: hook.url },
      },
      { wait: 60 },
    );
    const delegateId = /spawned delegate (\S+)/.exec(spawned.body.reply?.text ?? '')![1]!;
    await eventually(
      async () => (await streamedChars(keel, delegateWorkflowId(a, delegateId))) > 0,
      60_000,
      'the delegate to be streaming',
    );

    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGKILL');
    await exited;
    startWorkerProcess(keel, inject('databaseUrl'));

    const relayed = () =>
      hook.received.filter(
        (r) =>
          (r.body as { conversationId?: string; text?: string }).conversationId === c &&
          (r.body as { text: string }).text.startsWith('relay: '),
      );
    await eventually(async () => relayed().length === 1 || undefined, 90_000, 'the relay');
    expect(relayed().map((r) => (r.body as { text: string }).text)).toEqual([
      `relay: ${delegateId} success: done: survived`,
    ]);
    // The relay is recorded when the retrigger turn is committed, just after its delivery.
    const row = await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ outcome_version: number; relay: string | null }>(
          'SELECT outcome_version, relay FROM delegates WHERE delegate_id = $1',
          [delegateId],
        );
        return rows[0]?.relay ? rows[0] : undefined;
      },
      30_000,
      'the relay to be recorded',
    );
    expect(row).toEqual({ outcome_version: 1, relay: 'relayed' });
    // A later turn end reconciles again and relays nothing twice. Checked once the delegate has closed (no signal
    // can follow) and the conversation is at rest (no relay waiting out its 500 ms, no relay turn running).
    await keel.post(a, c, { text: 'thanks' }, { wait: 30 });
    await keel.client.workflow.getHandle(delegateWorkflowId(a, delegateId)).result();
    await eventually(() => quiescent(keel.client, conversationWorkflowId(a, c)), 30_000, 'the conversation at rest');
    expect(relayed()).toHaveLength(1);
  });

  it('kill -9 of the worker in a job run: after a restart the run completes and delivers exactly once', async () => {
    hook ??= await startWebhookReceiver();
    const keel = await startTestKeel({ worker: false });
    cleanups.push(() => keel.stop());
    const a = uniqueId('a');
    const worker = startWorkerProcess(keel, inject('databaseUrl'));
    const created = await keel.api.inject({
      method: 'POST',
      url: `/v1/agents/${a}/jobs`,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({
        name: 'nightly',
        schedule: { kind: 'every', intervalMs: 3_600_000 },
        task: '/delay 5000 job survived',
        delivery: { channel: 'webhook', url: hook.url },
      }),
    });
    const jobId = created.json<{ id: string }>().id;
    await keel.api.inject({ method: 'POST', url: `/v1/agents/${a}/jobs/${jobId}/run` });
    await streamingText(keel.pool, conversationWorkflowId(a, jobConversationId(jobId)), 60_000);

    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGKILL');
    await exited;
    startWorkerProcess(keel, inject('databaseUrl'));

    const runs = async () =>
      (await keel.api.inject({ method: 'GET', url: `/v1/agents/${a}/jobs/${jobId}/runs` })).json<
        { status: string; delivery: { outcome: string } }[]
      >();
    await eventually(async () => (await runs())[0]?.status === 'ok' || undefined, 90_000, 'the run to be booked');
    expect(await runs()).toEqual([
      expect.objectContaining({ status: 'ok', delivery: { outcome: 'delivered', attempts: 1 } }),
    ]);
    const mine = hook.received.filter(
      (r) => (r.body as { conversationId?: string }).conversationId === jobConversationId(jobId),
    );
    expect(mine.map((r) => (r.body as { text: string }).text)).toEqual(['echo: job survived']);
  });

  it('PostgreSQL stopped in a turn and started 10 s later: the turn completes, nothing lost or doubled', async () => {
    hook ??= await startWebhookReceiver();
    const dataDir = path.join(inject('workDir'), `pg-outage-${uniqueId('x')}`);
    const port = await freePort();
    let pg: PostgresProcess = await startPostgresProcess({ dataDir, port });
    cleanups.push(() => pg.stop());
    await migrate(pg.url);
    const keel = await startTestKeel({ databaseUrl: pg.url });
    cleanups.push(() => keel.stop());
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);

    const posted = await keel.post(a, c, {
      text: '/delay 3000 outlived the outage',
      delivery: { channel: 'webhook', url: hook.url },
    });
    await streamingText(keel.pool, key, 30_000);

    await pg.stop();
    // The outage itself: the scenario is a database that is gone for ten seconds.
    await new Promise((r) => setTimeout(r, 10_000));
    pg = await startPostgresProcess({ dataDir, port });

    await eventually(
      async () => (await turnStatus(keel, posted.body.turnId).catch(() => undefined)) === 'replied',
      90_000,
      'the turn to be replied',
    );
    const mine = hook.received.filter((r) => (r.body as { conversationId?: string }).conversationId === c);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.body).toMatchObject({ text: 'echo: outlived the outage' });
    expect(await transcriptRoles(keel, key)).toEqual(['user', 'assistant', 'tool']);
    const { rows } = await keel.pool.query<{ n: string; d: string }>(
      `SELECT (SELECT count(*) FROM turns WHERE conversation_key = $1) AS n,
              (SELECT count(*) FROM deliveries WHERE conversation_key = $1) AS d`,
      [key],
    );
    expect(rows[0]).toEqual({ n: '1', d: '1' });
    // And the conversation goes on.
    const next = await keel.post(a, c, { text: 'still here?' }, { wait: 30 });
    expect(next.body.reply?.text).toBe('echo: still here?');
  });

  it('kill -9 of the worker while a routine run awaits approval: approval resumes it, one delivery', async () => {
    hook ??= await startWebhookReceiver();
    const keel = await startTestKeel({ worker: false });
    cleanups.push(() => keel.stop());
    const r = routineApi(() => keel);
    const a = uniqueId('a');
    const worker = startWorkerProcess(keel, inject('databaseUrl'));
    await r.app(a, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
    await r.routine(a, 'crm', 'contact', {
      prompt: `Contact Ada ${author(CONTACT_ADA)}`,
      delivery: { channel: 'webhook', url: hook.url },
    });
    const waiting = await r.runNow(a, 'crm', 'contact', (x) => x.status === 'needs_approval');

    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGKILL');
    await exited;
    startWorkerProcess(keel, inject('databaseUrl'));

    const approved = await r.call('POST', `/v1/agents/${a}/routine-runs/${waiting.runId}/approve`);
    expect(approved.status).toBe(202);
    const done = await r.waitForRun(
      a,
      'crm',
      'contact',
      (x) => x.runId === waiting.runId && finished(x),
      'the approved run to finish',
    );
    expect(done).toMatchObject({ status: 'ok', digest: 'contacted Ada' });
    const mine = hook.received.filter((x) => (x.body as { agentId?: string }).agentId === a);
    expect(mine).toHaveLength(1);
    expect(await contactRecords(r, a, 'crm')).toBe(1);
  });

  it('kill -9 of the worker in a routine tool: the retried run replays its journal, upserting once', async () => {
    // An integration that holds its first request until the worker is dead, then answers.
    const calls: string[] = [];
    let first: (() => void) | undefined;
    const held = new Promise<void>((resolve) => (first = resolve));
    const server = createServer((req, res) => {
      calls.push(String(req.headers['idempotency-key']));
      if (calls.length === 1) {
        first?.();
        return; // never answered: the worker dies while it waits
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ synced: true }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
    const integrations = JSON.stringify({ crm: `http://127.0.0.1:${(server.address() as AddressInfo).port}/sync` });

    const keel = await startTestKeel({ worker: false });
    cleanups.push(() => keel.stop());
    const r = routineApi(() => keel);
    const a = uniqueId('a');
    const worker = startWorkerProcess(keel, inject('databaseUrl'), { KEEL_INTEGRATIONS: integrations });
    await r.app(a, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
    const sync = {
      name: 'syncAda',
      code: `async function syncAda() {
        const ada = await data.get('leads', 'l1');
        await data.upsert('leads', { name: 'contacted ' + ada.name });
        const answer = await integrations.call('crm', { id: ada.id });
        return 'synced: ' + answer.synced;
      }`,
    };
    await r.routine(a, 'crm', 'sync', { prompt: `Sync Ada ${author(sync)}` });
    await r.call('POST', `/v1/agents/${a}/apps/crm/routines/sync/run`);
    await held;
    expect(await contactRecords(r, a, 'crm')).toBe(1);

    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGKILL');
    await exited;
    startWorkerProcess(keel, inject('databaseUrl'), { KEEL_INTEGRATIONS: integrations });

    const done = await r.waitForRun(a, 'crm', 'sync', finished, 'the retried run to finish');
    expect(done).toMatchObject({ status: 'ok', digest: 'synced: true' });
    expect(await contactRecords(r, a, 'crm')).toBe(1);
    // The integration saw the same idempotency key twice: the receiver can tell the retry from a new call.
    expect(calls).toHaveLength(2);
    expect(new Set(calls).size).toBe(1);
  }, 120_000);

  it('kill -9 of the worker while a proposal awaits approval: restarted, the approval still applies it', async () => {
    const keel = await startTestKeel({ worker: false });
    cleanups.push(() => keel.stop());
    const r = reflectionApi(() => keel);
    const a = uniqueId('a');
    const env = { KEEL_REFLECTION_DRAIN_AT: '1' };
    const worker = startWorkerProcess(keel, inject('databaseUrl'), env);
    await r.agent(a);
    await r.say(a, 'c1', propose([{ file: 'persona.md', content: '# Persona\n\nYou are terse.\n' }]));
    const waiting = await r.nthProposal(a, 1);
    expect(waiting.status).toBe('awaiting_approval');

    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGKILL');
    await exited;
    startWorkerProcess(keel, inject('databaseUrl'), env);

    const approved = await r.call<{ status: string; version: number }>(
      'POST',
      `/v1/agents/${a}/proposals/${waiting.id}/approve`,
    );
    expect(approved.body).toMatchObject({ status: 'admitted', version: 2 });
    expect(await r.memory(a)).toMatchObject({ version: 2, files: { 'persona.md': '# Persona\n\nYou are terse.\n' } });
  });
});
