/**
 * A job's run asks for its turn and waits for the conversation's signal, holding no activity meanwhile; a worker
 * killed while it waits loses nothing. Real worker processes: the one holding the turn is killed with SIGKILL.
 */
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId, jobConversationId } from '../domain/ids';
import { submitToConversation } from '../services/conversation';
import { stopProcess } from '../scripts/processes';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';
import { startWorkerProcess, waitForPollers } from './support/workers';

let keel: TestKeel;
let hook: WebhookReceiver;
const workers: ChildProcess[] = [];
beforeAll(async () => {
  keel = await startTestKeel({ worker: false });
  hook = await startWebhookReceiver();
});
afterAll(async () => {
  await Promise.all(workers.map((w) => stopProcess(w)));
  await hook?.close();
  await keel?.stop();
});

async function api<T>(method: 'GET' | 'POST', url: string, body?: unknown): Promise<{ status: number; body: T }> {
  const headers = { 'content-type': 'application/json' };
  const payload = body === undefined ? {} : { headers, payload: JSON.stringify(body) };
  const res = await keel.api.inject({ method, url, ...payload });
  return { status: res.statusCode, body: res.json<T>() };
}

interface Run {
  runId: string;
  status: string;
  reply?: string;
  delivery?: { outcome: string; attempts: number };
}

describe('a job run waiting for its turn', () => {
  it('holds no activity while the turn runs, and survives the kill of the worker holding the turn', async () => {
    const first = startWorkerProcess(keel, inject('databaseUrl'));
    workers.push(first);
    await waitForPollers(keel, [first]);
    const a = uniqueId('a');
    const created = await api<{ id: string }>('POST', `/v1/agents/${a}/jobs`, {
      name: 'Slow digest',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: '/delay 4000 slow digest',
      delivery: { channel: 'webhook', url: hook.url },
    });
    expect(created.status).toBe(201);
    const jobId = created.body.id;
    expect((await api('POST', `/v1/agents/${a}/jobs/${jobId}/run`)).status).toBe(202);
    const { runId } = await eventually(
      async () => (await api<Run[]>('GET', `/v1/agents/${a}/jobs/${jobId}/runs`)).body[0],
      30_000,
      'the run',
    );
    const key = conversationWorkflowId(a, jobConversationId(jobId));
    const messageId = `${runId}#1`;
    await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ status: string }>(
          'SELECT status FROM turns WHERE conversation_key = $1 AND message_id = $2',
          [key, messageId],
        );
        return rows[0]?.status === 'running';
      },
      30_000,
      'the job turn to be running',
    );
    // Once it has asked for its turn, the run waits on a signal: nothing of it runs on a worker while the turn does
    // (it used to hold an activity for the whole turn).
    await eventually(
      async () => (await keel.client.workflow.getHandle(runId).describe()).raw.pendingActivities?.length === 0,
      10_000,
      'the run to hold no activity',
    );
    const { rows: during } = await keel.pool.query<{ status: string }>(
      'SELECT status FROM turns WHERE conversation_key = $1 AND message_id = $2',
      [key, messageId],
    );
    expect(during).toEqual([{ status: 'running' }]);

    first.kill('SIGKILL');
    await new Promise<void>((resolve) => (first.exitCode !== null ? resolve() : first.once('exit', () => resolve())));
    const second = startWorkerProcess(keel, inject('databaseUrl'));
    workers.push(second);

    const run = await eventually(
      async () => {
        const r = (await api<Run[]>('GET', `/v1/agents/${a}/jobs/${jobId}/runs`)).body[0];
        return r && r.status !== 'running' ? r : undefined;
      },
      60_000,
      'the run to finish',
    );
    expect(run).toMatchObject({
      status: 'ok',
      reply: 'echo: slow digest',
      delivery: { outcome: 'delivered', attempts: 1 },
    });
    // Exactly once, checked once the run has closed and its conversation is at rest.
    await eventually(
      async () => (await keel.client.workflow.getHandle(runId).describe()).status.name === 'COMPLETED',
      10_000,
      'the run to close',
    );
    await eventually(() => quiescent(keel.client, key), 30_000, 'the job conversation at rest');
    expect(hook.received.map((r) => (r.body as { text: string }).text)).toEqual(['echo: slow digest']);
    const { rows } = await keel.pool.query<{ status: string }>('SELECT status FROM turns WHERE conversation_key = $1', [
      key,
    ]);
    expect(rows).toEqual([{ status: 'replied' }]);
  });

  it('a turn taken up by a new conversation run (the first was terminated) still wakes its run at once', async () => {
    const worker = startWorkerProcess(keel, inject('databaseUrl'));
    workers.push(worker);
    await waitForPollers(keel, [worker]);
    const a = uniqueId('a');
    const created = await api<{ id: string }>('POST', `/v1/agents/${a}/jobs`, {
      name: 'Taken up',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: '/delay 2000 taken up',
    });
    const jobId = created.body.id;
    expect((await api('POST', `/v1/agents/${a}/jobs/${jobId}/run`)).status).toBe(202);
    const key = conversationWorkflowId(a, jobConversationId(jobId));
    await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ status: string }>(
          `SELECT status FROM turns WHERE conversation_key = $1 AND message_id LIKE '%#1'`,
          [key],
        );
        return rows[0]?.status === 'running';
      },
      30_000,
      'the job turn to be running',
    );
    // The run that accepted the turn (and held whom to tell) is gone; the next message starts a run that takes the
    // turn up from PostgreSQL. Whom to tell comes with it, so the job's run is woken, not left to its recheck timer.
    await keel.client.workflow.getHandle(key).terminate('test: the run holding the job turn is gone');
    const to = { agentId: a, conversationId: jobConversationId(jobId), taskQueue: keel.taskQueue };
    await submitToConversation({ client: keel.client, pool: keel.pool }, to, {
      messageId: uniqueId('m'),
      text: 'hello',
      mode: 'queue',
    });
    const woken = Date.now();
    const run = await eventually(
      async () => {
        const r = (await api<Run[]>('GET', `/v1/agents/${a}/jobs/${jobId}/runs`)).body[0];
        return r && r.status !== 'running' ? r : undefined;
      },
      60_000,
      'the run to finish',
    );
    expect(run).toMatchObject({ status: 'ok', reply: 'echo: taken up' });
    // Well before the 2-minute timer that re-reads the turn for a run never told (JOBS.turnRecheckMs).
    expect(Date.now() - woken).toBeLessThan(30_000);
  });
});
