import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

// Issue 24, in the shape of issue 27 (a run's turn runs in the run's own workflow): a run whose workflow task fails
// every time does not hold its job. The next fire ends it, books it as an error that says why, and runs. Here every
// workflow task of a run started by "run now" fails (test/support/failing-job-run-workflows.ts).
let keel: TestKeel;
let owner: WebhookReceiver;
let results: WebhookReceiver;

beforeAll(async () => {
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(__dirname, 'support', 'failing-job-run-workflows.ts'),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => console.error(m), log() {} },
  });
  const bundle = path.join(inject('workDir'), `${uniqueId('failing-job-run')}.js`);
  await writeFile(bundle, code);
  keel = await startTestKeel({ workflowBundlePath: bundle, jobs: { everyFloorMs: 1_000 } });
  owner = await startWebhookReceiver();
  results = await startWebhookReceiver();
}, 120_000);

afterAll(async () => {
  await keel?.stop();
  await owner?.close();
  await results?.close();
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
  attempt: number;
  lastMessage: string;
}

interface Run {
  runId: string;
  status: string;
  error?: string;
  reply?: string;
}

describe('a job run whose every workflow task fails', () => {
  it('is listed as failing, then ended by a fire, booked with why; the job runs on; the owner hears once', async () => {
    const a = uniqueId('a');
    await api('PUT', `/v1/agents/${a}`, { name: 'A', owner: { delivery: { channel: 'webhook', url: owner.url } } });
    const job = await api<{ id: string }>('POST', `/v1/agents/${a}/jobs`, {
      name: 'Stuck digest',
      schedule: { kind: 'every', intervalMs: 6_000 },
      task: 'digest',
      delivery: { channel: 'webhook', url: results.url },
    });
    await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`);
    const runs = () => api<Run[]>('GET', `/v1/agents/${a}/jobs/${job.id}/runs`);
    const stuck = await eventually(async () => (await runs()).find((r) => r.runId.includes('-now-')), 30_000, 'run');

    // While it is stuck, the console's list of failing runs and /metrics show it.
    const failing = await eventually(
      async () => {
        const { runs: listed } = await api<{ runs: FailingRun[] }>('GET', `/v1/agents/${a}/failing-runs`);
        return listed.find((r) => r.workflowId === stuck.runId);
      },
      30_000,
      'the run listed as failing',
    );
    expect(failing).toMatchObject({
      workflowType: 'jobRunWorkflow',
      cause: 'error',
      lastMessage: 'test fault: every workflow task of this run fails',
    });
    const metrics = (await keel.api.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/^keel_workflow_task_failures_total\{type="jobRunWorkflow",cause="error"\} [1-9]\d*$/m);

    // A fire of the Schedule ends it and runs: the stuck run booked as an error naming why, the job's result sent.
    const ok = await eventually(async () => (await runs()).find((r) => r.status === 'ok'), 60_000, 'a run ok');
    expect(ok.reply).toBe('echo: digest');
    const ended = (await runs()).find((r) => r.runId === stuck.runId);
    expect(ended?.status).toBe('error');
    const why = 'test fault: every workflow task of this run fails';
    expect(ended?.error).toMatch(
      new RegExp(`^the run was ended: its workflow task failing \\(error, attempt \\d+\\): ${why}$`),
    );
    const described = await keel.client.workflow.getHandle(stuck.runId).describe();
    expect(described.status.name).toBe('TERMINATED');
    const after = await api<{ status: string }>('GET', `/v1/agents/${a}/jobs/${job.id}`);
    expect(after.status).toBe('active');

    // Told once, though later fires could have told again: checked after another run was booked.
    await eventually(
      async () => (await runs()).filter((r) => r.status === 'ok').length >= 2,
      30_000,
      'a second run ok',
    );
    expect(owner.received).toHaveLength(1);
    expect((owner.received[0]!.body as { text: string }).text).toMatch(
      /^A run of scheduled job "Stuck digest" was stuck and has been ended: the run was ended: its workflow task/,
    );
  }, 120_000);
});
