/**
 * A job's run runs its task's turn in its own workflow (issue 27): one workflow per fire, its steps local. A worker
 * killed mid-turn loses nothing and sends nothing twice, and delegates the turn spawns report to the job's
 * conversation. Real worker processes: the one holding the turn is killed with SIGKILL.
 */
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId, jobConversationId } from '../domain/ids';
import { stopProcess } from '../scripts/processes';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';
import { localStepsOf, startWorkerProcess, waitForPollers } from './support/workers';

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

/** A worker process, polling the task queue. */
async function startPolledWorker(): Promise<ChildProcess> {
  const worker = startWorkerProcess(keel, inject('databaseUrl'));
  workers.push(worker);
  await waitForPollers(keel, [worker]);
  return worker;
}

/** An hourly job of the agent, created and run now: its id. */
async function runNow(a: string, job: { name: string; task: string; delivery?: unknown }): Promise<string> {
  const created = await api<{ id: string }>('POST', `/v1/agents/${a}/jobs`, {
    ...job,
    schedule: { kind: 'every', intervalMs: 3_600_000 },
  });
  expect(created.status).toBe(201);
  const jobId = created.body.id;
  expect((await api('POST', `/v1/agents/${a}/jobs/${jobId}/run`)).status).toBe(202);
  return jobId;
}

/** The job's first run, once booked. */
function finishedRun(a: string, jobId: string): Promise<Run> {
  return eventually(
    async () => {
      const r = (await api<Run[]>('GET', `/v1/agents/${a}/jobs/${jobId}/runs`)).body[0];
      return r && r.status !== 'running' ? r : undefined;
    },
    60_000,
    'the run to finish',
  );
}

describe("a job run's turn", () => {
  it('runs in the run, with no conversation workflow, and survives the kill of the worker holding it', async () => {
    const first = await startPolledWorker();
    const a = uniqueId('a');
    const jobId = await runNow(a, {
      name: 'Slow digest',
      task: '/delay 4000 slow digest',
      delivery: { channel: 'webhook', url: hook.url },
    });
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
    // The turn is the run's own: a local step of its workflow, no activity, no workflow of the job's conversation.
    const described = await keel.client.workflow.getHandle(runId).describe();
    expect(described.raw.pendingActivities ?? []).toHaveLength(0);
    await expect(keel.client.workflow.getHandle(key).describe()).rejects.toThrow(/not found/i);
    const { rows: during } = await keel.pool.query<{ status: string }>(
      'SELECT status FROM turns WHERE conversation_key = $1 AND message_id = $2',
      [key, messageId],
    );
    expect(during).toEqual([{ status: 'running' }]);

    first.kill('SIGKILL');
    await new Promise<void>((resolve) => (first.exitCode !== null ? resolve() : first.once('exit', () => resolve())));
    const second = startWorkerProcess(keel, inject('databaseUrl'));
    workers.push(second);

    const run = await finishedRun(a, jobId);
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
    expect(hook.received.map((r) => (r.body as { text: string }).text)).toEqual(['echo: slow digest']);
    const { rows } = await keel.pool.query<{ status: string }>('SELECT status FROM turns WHERE conversation_key = $1', [
      key,
    ]);
    expect(rows).toEqual([{ status: 'replied' }]);
    // A plain answer needs nothing of the workflow: begun, answered, delivered and booked in one local step of the
    // run (job-run-at-once), which the second worker took again from the start; no other step.
    const steps = ['runJobAtOnce', 'beginJobRunTurn', 'callTurnModel', 'deliverJobTurn', 'bookJobRun'];
    const taken = await Promise.all(steps.map(async (t) => (await localStepsOf(keel, runId, t)).length));
    expect(taken).toEqual([1, 0, 0, 0, 0]);
  });

  it('hands the delegates its turn spawned to the job conversation, whose workflow relays their outcome', async () => {
    await startPolledWorker();
    const a = uniqueId('a');
    const jobId = await runNow(a, {
      name: 'Delegating digest',
      task: `/tool spawn_delegate ${JSON.stringify({ text: '/delay 500 gather the news' })}`,
    });
    const run = await finishedRun(a, jobId);
    expect(run).toMatchObject({ status: 'ok' });
    const delegateId = /spawned delegate (\S+)/.exec(run.reply ?? '')?.[1];
    expect(delegateId).toBeDefined();
    // The outcome comes back to the job's conversation: admitted and relayed by its workflow, started for it.
    const delegate = await eventually(
      async () => {
        const d = (
          await api<{ relay?: string; outcome?: { kind: string } }>('GET', `/v1/agents/${a}/delegates/${delegateId}`)
        ).body;
        return d.relay ? d : undefined;
      },
      30_000,
      'the relay',
    );
    expect(delegate).toMatchObject({ relay: 'relayed', outcome: { kind: 'success' } });
    const key = conversationWorkflowId(a, jobConversationId(jobId));
    await eventually(() => quiescent(keel.client, key), 30_000, 'the job conversation at rest');
    const { rows } = await keel.pool.query<{ text: string }>(
      `SELECT text FROM messages WHERE conversation_key = $1 AND role = 'assistant'`,
      [key],
    );
    expect(rows.filter((r) => r.text?.startsWith('relay: '))).toHaveLength(1);
  });
});
