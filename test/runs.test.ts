import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { noneTransport } from '../adapters/delivery/none';
import { slackTransport } from '../adapters/delivery/slack';
import { webhookTransport } from '../adapters/delivery/webhook';
import { DEFAULT_JOB_SETTINGS } from '../services/job-settings';
import { scriptedProvider } from '../worker/wiring';
import { conversationWorkflowId } from '../domain/ids';
import { bundleWorkflows } from '../worker/bundle';
import { createKeelWorker } from '../worker/worker';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';
import { loopbackEgress } from './support/egress';

let keel: TestKeel;
let hook: WebhookReceiver;
beforeAll(async () => {
  keel = await startTestKeel();
  hook = await startWebhookReceiver();
});
afterAll(async () => {
  await keel?.stop();
  await hook?.close();
});

/** What a queue's workflows are doing, for a test that waited in vain: type, status, and a pending task's attempt. */
async function queueWorkflows(keel: TestKeel): Promise<string> {
  const seen: string[] = [];
  for await (const w of keel.client.workflow.list({ query: `TaskQueue = "${keel.taskQueue}"` })) {
    const { raw } = await keel.client.workflow.getHandle(w.workflowId, w.runId).describe();
    const task = raw.pendingWorkflowTask;
    seen.push(`${w.type} ${w.status.name}${task ? ` (task attempt ${task.attempt})` : ''}`);
  }
  return seen.join(', ') || 'none';
}

async function api<T>(
  k: TestKeel,
  method: 'GET' | 'POST',
  url: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const res = await k.api.inject({
    method,
    url,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json<T>() };
}

describe('runs: history, replay and reset for operators', () => {
  it('exports a conversation history as JSON and replays it against the code the server runs', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await keel.post(a, c, { text: 'hello' }, { wait: 30 });
    const id = encodeURIComponent(conversationWorkflowId(a, c));
    type Exported = { events: { eventType: string; userMetadata?: { summary?: { data?: string } } }[] };
    // The UI shows each step with a summary in Keel's words: a turn's steps are local activities (markers), in
    // the history once the turn's workflow task has completed. This turn is one: its model step sent the reply.
    const summariesOf = (h: Exported) =>
      h.events
        .filter((e) => e.eventType === 'EVENT_TYPE_MARKER_RECORDED' && e.userMetadata?.summary?.data)
        .map((e) => JSON.parse(Buffer.from(e.userMetadata!.summary!.data!, 'base64').toString('utf8')) as string);
    const summaries = await eventually(
      async () => {
        const history = await api<Exported>(keel, 'GET', `/v1/runs/${id}/history`);
        expect(history.status).toBe(200);
        expect(history.body.events[0]?.eventType).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_STARTED');
        const found = summariesOf(history.body);
        return found.some((s) => s.startsWith('model call 1 of turn ')) && found;
      },
      10_000,
      'the turn recorded in its history',
    );
    expect(summaries).toEqual([expect.stringMatching(/^model call 1 of turn /)]);
    expect((await api<{ ok: boolean }>(keel, 'POST', `/v1/runs/${id}/replay`)).body).toMatchObject({ ok: true });
    // The replay is in the trail of the run's agent, with who asked for it (`dev`: this Keel has no tokens).
    const trail = await api<{ entries: { action: string; actor: string; subject: string; detail: unknown }[] }>(
      keel,
      'GET',
      `/v1/agents/${a}/audit`,
    );
    expect(trail.body.entries).toEqual([
      expect.objectContaining({
        action: 'run.replay',
        actor: 'dev',
        subject: conversationWorkflowId(a, c),
        detail: { runId: expect.any(String) as string, ok: true },
      }),
    ]);
    const missing = await api<{ error: { code: string } }>(
      keel,
      'GET',
      `/v1/runs/${encodeURIComponent('conv:nobody:none')}/history`,
    );
    expect(missing.status).toBe(404);
    const bad = await api<{ error: { code: string } }>(keel, 'POST', `/v1/runs/${id}/reset`, {
      to: 'somewhere',
      reason: 'x',
    });
    expect(bad.status).toBe(400);
    expect((await api(keel, 'POST', `/v1/runs/${encodeURIComponent('conv:nobody:none')}/replay`)).status).toBe(404);
    expect(
      (
        await api(keel, 'POST', `/v1/runs/${encodeURIComponent('conv:nobody:none')}/reset`, {
          to: 'last-workflow-task',
          reason: 'x',
        })
      ).status,
    ).toBe(404);
  }, 120_000);

  it('are for operators: a token scoped to one agent is refused them (403)', async () => {
    const scoped = await startTestKeel({
      worker: false,
      tokens: new Map([
        ['op', '*'],
        ['agent-token', 'a1'],
      ]),
    });
    try {
      const [a, c] = ['a1', uniqueId('c')];
      const id = encodeURIComponent(conversationWorkflowId(a, c));
      const as = (token: string) =>
        scoped.api.inject({
          method: 'GET',
          url: `/v1/runs/${id}/history`,
          headers: { authorization: `Bearer ${token}` },
        });
      expect((await as('agent-token')).statusCode).toBe(403);
      // The operator's token reaches the route (the workflow does not exist: 404 for the workflow, not the route).
      expect((await as('op')).json<{ error: { message: string } }>().error.message).toMatch(/^workflow conv:a1:/);
      expect(
        (await scoped.api.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer agent-token' } }))
          .statusCode,
      ).toBe(403);
    } finally {
      await scoped.stop();
    }
  }, 120_000);

  it('a job run that failed because of a bug is reset after the fix and completes, with one delivery', async () => {
    // The bug: this worker's workflow code fails a job run once its first step delivered
    // (test/support/job-delivery-bug.ts). The run is reset to that step, which runs again and sends nothing twice.
    const code = await bundleWorkflows({
      workflowInterceptorModules: [path.join(__dirname, 'support', 'job-delivery-bug.ts')],
    });
    const buggyBundle = path.join(inject('workDir'), `bundle-job-bug-${uniqueId('b')}.js`);
    await writeFile(buggyBundle, code);
    const buggy = await startTestKeel({ workflowBundlePath: buggyBundle });
    let fixed: Awaited<ReturnType<typeof createKeelWorker>> | undefined;
    let running: Promise<void> | undefined;
    const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    try {
      const a = uniqueId('a');
      const job = await api<{ id: string }>(buggy, 'POST', `/v1/agents/${a}/jobs`, {
        name: 'digest',
        schedule: { kind: 'every', intervalMs: 3_600_000 },
        task: 'digest please',
        delivery: { channel: 'webhook', url: hook.url },
      });
      expect((await api(buggy, 'POST', `/v1/agents/${a}/jobs/${job.body.id}/run`)).status).toBe(202);
      // A worker just started on a fresh bundle, beside the rest of the suite: its first task may wait a while.
      const runId = await eventually(
        async () =>
          (await api<{ runId: string }[]>(buggy, 'GET', `/v1/agents/${a}/jobs/${job.body.id}/runs`)).body[0]?.runId,
        60_000,
        'the run',
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}; its queue's workflows: ${await queueWorkflows(buggy)}`);
      });
      const handle = buggy.client.workflow.getHandle(runId);
      await eventually(async () => (await handle.describe()).status.name === 'FAILED', 30_000, 'the run to fail');
      const mine = () => hook.received.filter((r) => (r.body as { agentId?: string }).agentId === a);
      // The run's first step delivered the result before the bug failed the run (job-run-at-once).
      expect(mine()).toHaveLength(1);

      // The fix: the buggy worker goes, a worker with the real code takes its task queue; then the reset.
      await buggy.stopWorker();
      fixed = await createKeelWorker({
        connection,
        namespace: 'default',
        taskQueue: buggy.taskQueue,
        workflows: { workflowBundle: { codePath: inject('workflowBundlePath') } },
        deps: {
          pool: buggy.pool,
          provider: scriptedProvider(buggy.pool),
          defaultModel: 'scripted',
          transports: {
            none: noneTransport(),
            webhook: webhookTransport({ egress: loopbackEgress }),
            slack: slackTransport({ egress: loopbackEgress }),
          },
          egress: loopbackEgress,
          jobs: DEFAULT_JOB_SETTINGS,
        },
      });
      running = fixed.run();
      const reset = await api<{ newRunId: string }>(buggy, 'POST', `/v1/runs/${encodeURIComponent(runId)}/reset`, {
        to: 'last-workflow-task',
        reason: 'fixed the delivery bug',
      });
      expect(reset.status).toBe(200);
      const trail = await api<{ entries: { action: string; detail: unknown }[] }>(
        buggy,
        'GET',
        `/v1/agents/${a}/audit`,
      );
      expect(trail.body.entries.find((e) => e.action === 'run.reset')?.detail).toEqual({
        runId: expect.any(String) as string,
        newRunId: reset.body.newRunId,
        to: 'last-workflow-task',
        reason: 'fixed the delivery bug',
      });
      const result = buggy.client.workflow.getHandle(runId, reset.body.newRunId);
      await result.result();
      expect(mine()).toHaveLength(1);
      expect(mine()[0]!.body).toMatchObject({ text: 'echo: digest please' });
      const runs = (
        await api<{ status: string; delivery: { outcome: string } }[]>(
          buggy,
          'GET',
          `/v1/agents/${a}/jobs/${job.body.id}/runs`,
        )
      ).body;
      expect(runs.map((r) => [r.status, r.delivery.outcome])).toEqual([['ok', 'delivered']]);
    } finally {
      fixed?.shutdown();
      await running;
      await connection.close();
      await buggy.stop();
    }
  }, 120_000);
});
