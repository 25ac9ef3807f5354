import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection, WorkflowClient } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freeClusterPorts, startClusterStack, type ClusterStack } from '../../scripts/cluster-stack';
import { stopProcess } from '../../scripts/processes';
import { promoteBuild } from '../../worker/deployment';
import { conversationWorkflowId, delegateWorkflowId, reflectionWorkflowId } from '../../domain/ids';
import { bundleWorkflows } from '../../worker/bundle';
import { eventually, settledHistory, uniqueId, type SubmitAnswer } from '../support/keel';
import { author, CONTACT_ADA, finished, routineApiAt, type RoutineApi } from '../support/routines';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';

/**
 * Keel's production topology, one cluster for the whole file (it is slow to start), on a real Temporal server v1.29.1
 * on PostgreSQL.
 *
 * Secrets at rest first: the cluster has a key for them, as npm start has, so a signed webhook and a job with a signed
 * delivery are taken and delivered signed (issue 50: the cluster refused every secret, and nothing ran one there).
 *
 * Then deploying a new Keel while agents run: build A runs a conversation, a delegate and a routine run waiting for
 * approval; build B, whose conversation, delegate and routine run would not replay A's histories, becomes current.
 * What was in flight finishes on A, new work (and a conversation after its idle close) runs on B, and no history has
 * a failed workflow task.
 */
const IDLE_MS = 8_000;
const DEPLOYMENT = 'keel';

let dir: string;
let stack: ClusterStack;
let connection: Connection;
let hook: WebhookReceiver;
let r: RoutineApi;
let bundleB: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'keel-versioning-'));
  const bundleA = path.join(dir, 'workflows-a.js');
  await writeFile(bundleA, await bundleWorkflows());
  bundleB = await bundleWorkflows({
    workflowsPath: path.resolve(__dirname, '..', 'support', 'nondeterministic-workflows.ts'),
  });
  await writeFile(path.join(dir, 'workflows-b.js'), bundleB);
  stack = await startClusterStack({
    workers: 1,
    apis: 1,
    dataDir: dir,
    ...(await freeClusterPorts(1)),
    deployment: { name: DEPLOYMENT, buildId: 'A' },
    env: {
      KEEL_MODEL: 'scripted',
      KEEL_WORKFLOW_BUNDLE: bundleA,
      KEEL_CONVERSATION_IDLE_MS: String(IDLE_MS),
    },
    logFile: path.join(dir, 'cluster.log'),
    log: () => undefined,
  });
  connection = await Connection.connect({ address: stack.temporalAddress });
  hook = await startWebhookReceiver();
  r = routineApiAt(stack.apis[0]!);
});

afterAll(async () => {
  await connection?.close();
  await hook?.close();
  await stack?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function post(a: string, c: string, text: string): Promise<SubmitAnswer> {
  const res = await fetch(`${stack.apis[0]}/v1/agents/${a}/conversations/${c}/messages?wait=60`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text }),
  });
  return (await res.json()) as SubmitAnswer;
}

async function get<T>(url: string): Promise<T> {
  return (await (await fetch(`${stack.apis[0]}${url}`)).json()) as T;
}

/**
 * The build a workflow execution runs on and how it moves between builds, as Temporal records them once its last
 * workflow task has completed (a turn's reply is out while the task that made it may still run).
 */
async function versioning(workflowId: string): Promise<{ build: string | null; behavior: string }> {
  const sealed = { connection, namespace: stack.namespace, dataConverter: stack.dataConverter };
  await settledHistory({ client: new Client(sealed) }, workflowId);
  const { workflowExecutionInfo } = await connection.workflowService.describeWorkflowExecution({
    namespace: stack.namespace,
    execution: { workflowId },
  });
  const info = workflowExecutionInfo?.versioningInfo;
  return {
    build: info?.deploymentVersion?.buildId || null,
    behavior: temporal.api.enums.v1.VersioningBehavior[info?.behavior ?? 0] ?? 'unknown',
  };
}
const build = async (workflowId: string) => (await versioning(workflowId)).build;
// The stack seals its payloads: this test's client reads with the same key.
const client = () => new WorkflowClient({ connection, namespace: stack.namespace, dataConverter: stack.dataConverter });

/** Every run of a workflow id, oldest first, with its history. */
async function runsOf(workflowId: string) {
  const runs = [];
  for await (const w of client().list({ query: `WorkflowId = '${workflowId}'` })) runs.push(w.runId);
  return Promise.all(
    runs.reverse().map(async (runId) => ({
      runId,
      history: await client().getHandle(workflowId, runId).fetchHistory(),
    })),
  );
}

// First, on build A alone: the deploy below leaves build B current, with its worker stopped.
describe('secrets on the cluster', () => {
  // The reproduction's secret; the job's is another, so each receiver verifies with its own.
  const MESSAGE_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const JOB_SECRET = 'whsec_2p2Jm7aQ0cYVtH5Zk3uQWf1bXo9Rl4sN';

  it('a message and a job with a webhook secret are accepted; each delivery is signed and verifies', async () => {
    const a = uniqueId('sec');
    const toMessage = await startWebhookReceiver({ secret: MESSAGE_SECRET, rejectUnverified: true });
    const toJob = await startWebhookReceiver({ secret: JOB_SECRET, rejectUnverified: true });
    try {
      const sent = await r.call('POST', `/v1/agents/${a}/conversations/sec/messages`, {
        text: 'signed',
        delivery: { channel: 'webhook', url: toMessage.url, secret: MESSAGE_SECRET },
      });
      expect(sent, JSON.stringify(sent.body)).toMatchObject({ status: 202 });
      expect(JSON.stringify(sent.body)).not.toContain(MESSAGE_SECRET);

      // A one-shot due soon, but after its Schedule exists even on a busy machine: it fires from the cluster server's
      // Schedule, as a job in production does.
      const job = await r.call('POST', `/v1/agents/${a}/jobs`, {
        name: 'signed report',
        schedule: { kind: 'at', at: new Date(Date.now() + 10_000).toISOString() },
        task: 'report',
        delivery: { channel: 'webhook', url: toJob.url, secret: JOB_SECRET },
      });
      expect(job, JSON.stringify(job.body)).toMatchObject({ status: 201 });
      expect(JSON.stringify(job.body)).not.toContain(JOB_SECRET);

      await toMessage.waitFor((got) => got.length >= 1, 60_000);
      await toJob.waitFor((got) => got.length >= 1, 90_000);
      const seen = (hook: WebhookReceiver) =>
        hook.received.map((x) => ({
          status: x.status,
          validSignature: x.validSignature,
          text: (x.body as { text?: string } | undefined)?.text,
        }));
      expect(seen(toMessage)).toEqual([{ status: 200, validSignature: true, text: 'echo: signed' }]);
      expect(seen(toJob)).toEqual([{ status: 200, validSignature: true, text: 'echo: report' }]);
    } finally {
      await Promise.all([toMessage.close(), toJob.close()]);
    }
  });
});

describe('a deploy while agents run (Worker Deployment versioning)', () => {
  it('in-flight work finishes on build A, new work runs on build B, no non-determinism', async () => {
    const a = uniqueId('a');
    const [busy, quiet, fresh] = [uniqueId('busy'), uniqueId('quiet'), uniqueId('fresh')];

    // Reflection is on: its one workflow per agent never ends, so it moves from build to build.
    const put = await fetch(`${stack.apis[0]}/v1/agents/${a}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: a, reflection: { enabled: true } }),
    });
    expect(put.status).toBe(200);

    // On build A: a conversation with a delegate out (its model call takes 20 s), a routine run waiting for
    // approval, and a quiet conversation that will close idle.
    const spawned = await post(a, busy, `/tool spawn_delegate ${JSON.stringify({ text: '/delay 20000 research' })}`);
    const delegateId = /spawned delegate (\S+)/.exec(spawned.reply?.text ?? '')?.[1];
    expect(delegateId).toBeTruthy();
    await r.app(a, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
    await r.routine(a, 'crm', 'contact', {
      prompt: `Contact Ada ${author(CONTACT_ADA)}`,
      delivery: { channel: 'webhook', url: hook.url },
    });
    const waiting = await r.runNow(a, 'crm', 'contact', (x) => x.status === 'needs_approval');
    expect(await post(a, quiet, 'hello')).toMatchObject({ reply: { text: 'echo: hello' } });
    const onA = {
      busy: conversationWorkflowId(a, busy),
      quiet: conversationWorkflowId(a, quiet),
      delegate: delegateWorkflowId(a, delegateId!),
      routine: waiting.workflowId,
    };
    for (const id of Object.values(onA)) {
      expect(await versioning(id)).toEqual({ build: 'A', behavior: 'VERSIONING_BEHAVIOR_PINNED' });
    }
    const reflection = reflectionWorkflowId(a);
    expect(await eventually(() => versioning(reflection).catch(() => undefined), 30_000, 'reflection')).toEqual({
      build: 'A',
      behavior: 'VERSIONING_BEHAVIOR_AUTO_UPGRADE',
    });
    const quietFirstRun = (await runsOf(onA.quiet)).map((x) => x.runId);

    // Deploy build B beside A, and make it current.
    const workerB = stack.addWorker({ KEEL_BUILD_ID: 'B', KEEL_WORKFLOW_BUNDLE: path.join(dir, 'workflows-b.js') });
    const promoted = await promoteBuild(connection, {
      namespace: stack.namespace,
      taskQueue: stack.taskQueue,
      deployment: { name: DEPLOYMENT, buildId: 'B' },
    });
    expect(promoted).toEqual({ current: 'B', previous: 'A' });

    // New work runs on B: B's own code (its timer comes first), not A's.
    expect(await post(a, fresh, 'hello')).toMatchObject({ reply: { text: 'echo: hello' } });
    expect(await build(conversationWorkflowId(a, fresh))).toBe('B');
    // The fresh conversation's turn reached reflection, which went on on B.
    await eventually(async () => (await build(reflection)) === 'B', 30_000, 'reflection to move to build B');
    const [freshRun] = await runsOf(conversationWorkflowId(a, fresh));
    expect(freshRun!.history.events?.find((e) => e.timerStartedEventAttributes)).toBeTruthy();
    await r.routine(a, 'crm', 'greet', {
      prompt: author({ name: 'greet', code: "async function greet() { return 'hi from B'; }" }),
    });
    const greeted = await r.runNow(a, 'crm', 'greet');
    expect(greeted).toMatchObject({ status: 'ok', digest: 'hi from B' });
    expect(await build(greeted.workflowId)).toBe('B');

    // In flight on A, finishing on A: the approved routine run delivers once.
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
    await hook.waitFor((got) => got.length >= 1, 30_000);
    expect(await build(onA.routine)).toBe('A');

    // The busy conversation answers on A while its delegate is out; the delegate's result is relayed once.
    expect(await post(a, busy, 'still there?')).toMatchObject({ reply: { text: 'echo: still there?' } });
    const relayed = await eventually(
      async () => {
        const d = await get<{ relay?: string; outcome?: { kind: string } }>(`/v1/agents/${a}/delegates/${delegateId}`);
        return d.relay === 'relayed' ? d : undefined;
      },
      90_000,
      'the delegate to be relayed',
    );
    expect(relayed.outcome?.kind).toBe('success');
    expect(await build(onA.delegate)).toBe('A');
    expect(await build(onA.busy)).toBe('A');

    // The quiet conversation closed idle on A; its next message starts a run on B.
    await eventually(
      async () => (await client().getHandle(onA.quiet).describe()).status.name === 'COMPLETED',
      60_000,
      'the quiet conversation to close idle',
    );
    expect(await post(a, quiet, 'back again')).toMatchObject({ reply: { text: 'echo: back again' } });
    expect(await build(onA.quiet)).toBe('B');
    const quietRuns = await runsOf(onA.quiet);
    expect(quietRuns.map((x) => x.runId).slice(0, 1)).toEqual(quietFirstRun);
    expect(quietRuns).toHaveLength(2);

    // Counted at rest, once a second delivery or relay could have happened.
    const busyMessages = await get<{ messages: { role: string; text: string }[] }>(
      `/v1/agents/${a}/conversations/${busy}?limit=1000`,
    );
    expect(busyMessages.messages.filter((m) => m.text === `delegate.finished ${delegateId} (success)`)).toHaveLength(1);
    expect(hook.received.filter((x) => x.status === 200)).toHaveLength(1);

    // No workflow task failed anywhere, and B's code really could not have replayed A's routine run.
    const ids = [...Object.values(onA), conversationWorkflowId(a, fresh), greeted.workflowId];
    for (const id of ids) {
      for (const run of await runsOf(id)) {
        const failed = (run.history.events ?? []).filter((e) => e.workflowTaskFailedEventAttributes);
        expect({ id, failed: failed.length }).toEqual({ id, failed: 0 });
      }
    }
    const [routineRun] = await runsOf(onA.routine);
    await expect(
      Worker.runReplayHistory(
        { workflowBundle: { code: bundleB }, dataConverter: stack.dataConverter },
        routineRun!.history,
        onA.routine,
      ),
    ).rejects.toThrow(/Nondeterminism|DeterminismViolation/);
    await stopProcess(workerB);
  });
});
