import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId, jobConversationId } from '../domain/ids';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

// Issue 24: a job run whose conversation cannot finish its turn is booked as an error within the deadline, and the
// Schedule goes on. Here every workflow task of the job's conversation fails (test/support/failing-conversation-…).
const DEADLINE_MS = 4_000;

let keel: TestKeel;
let owner: WebhookReceiver;

beforeAll(async () => {
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(__dirname, 'support', 'failing-conversation-workflows.ts'),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => console.error(m), log() {} },
  });
  const bundle = path.join(inject('workDir'), `${uniqueId('failing-conversation')}.js`);
  await writeFile(bundle, code);
  keel = await startTestKeel({
    workflowBundlePath: bundle,
    jobs: { turnDeadlineMs: DEADLINE_MS, everyFloorMs: 1_000, backoffMs: [200, 200, 200, 200, 200] },
  });
  owner = await startWebhookReceiver();
}, 120_000);

afterAll(async () => {
  await keel?.stop();
  await owner?.close();
});

async function api<T>(method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown): Promise<T> {
  const res = await keel.api.inject({
    method,
    url,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
  });
  return res.json<T>();
}

interface FailingRun {
  workflowId: string;
  workflowType: string;
  cause: string;
  failures: number;
  attempt: number;
  lastMessage: string;
}

interface Run {
  runId: string;
  status: string;
  error?: string;
  durationMs?: number;
}

describe('a job whose conversation fails every workflow task', () => {
  it('books each run an error naming why within the deadline; the next fire runs; the owner hears once', async () => {
    const a = uniqueId('a');
    await api('PUT', `/v1/agents/${a}`, { name: 'A', owner: { delivery: { channel: 'webhook', url: owner.url } } });
    const job = await api<{ id: string }>('POST', `/v1/agents/${a}/jobs`, {
      name: 'Stuck digest',
      schedule: { kind: 'every', intervalMs: 8_000 },
      task: 'digest',
    });
    const asked = Date.now();
    await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`);
    const booked = (n: number) =>
      eventually(
        async () => {
          const runs = await api<Run[]>('GET', `/v1/agents/${a}/jobs/${job.id}/runs`);
          const done = runs.filter((r) => r.status !== 'running');
          return done.length >= n ? done : undefined;
        },
        40_000,
        `${n} booked runs`,
      );
    const [first] = await booked(1);
    // Within the deadline, plus what booking takes: not after the 15 min a run would have waited by default.
    expect(Date.now() - asked).toBeLessThan(DEADLINE_MS + 10_000);
    expect(first).toMatchObject({ status: 'error' });
    expect(first!.error).toMatch(/^turn did not finish in 4 s: workflow task failing \(error, attempt \d+\)$/);

    // The Schedule goes on: its next fire runs, and is booked the same way.
    const runs = await booked(2);
    expect(runs.map((r) => r.status)).toEqual(['error', 'error']);
    expect(runs.every((r) => r.error?.startsWith('turn did not finish in 4 s: workflow task failing'))).toBe(true);
    const after = await api<{ status: string; consecutiveErrors: number }>('GET', `/v1/agents/${a}/jobs/${job.id}`);
    expect(after).toMatchObject({ status: 'active', consecutiveErrors: 2 });

    // The failing conversation run is listed for the console, and counted in /metrics.
    const conversation = conversationWorkflowId(a, jobConversationId(job.id));
    const failing = await eventually(
      async () => {
        const { runs: listed } = await api<{ runs: FailingRun[] }>('GET', `/v1/agents/${a}/failing-runs`);
        return listed.find((r) => r.workflowId === conversation);
      },
      30_000,
      'the conversation listed as failing',
    );
    expect(failing).toMatchObject({
      workflowType: 'conversationWorkflow',
      cause: 'error',
      lastMessage: 'test fault: every workflow task of this conversation fails',
    });
    const metrics = (await keel.api.inject({ method: 'GET', url: '/metrics' })).body;
    const counted = /^keel_workflow_task_failures_total\{type="conversationWorkflow",cause="error"\} (\d+)$/m.exec(
      metrics,
    );
    expect(failing.attempt).toBeGreaterThanOrEqual(3);
    expect(failing.failures).toBeGreaterThanOrEqual(1);
    expect(Number(counted?.[1])).toBeGreaterThanOrEqual(failing.failures);

    // Told once for the stuck conversation run, though two runs met it.
    expect(owner.received).toHaveLength(1);
    expect((owner.received[0]!.body as { text: string }).text).toMatch(
      new RegExp(`^The conversation of scheduled job ${job.id} is stuck: its workflow task failing \\(error, attempt`),
    );
  }, 90_000);
});
