import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobConversationId, jobScheduleId } from '../domain/ids';
import { temporalUnavailable } from '../services/temporal-status';
import { eventually, queueAnswer, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

let keel: TestKeel;
const receivers: WebhookReceiver[] = [];
beforeAll(async () => {
  // The backoff of failed runs is shortened here; its real steps (30 s … 60 min) are unit-tested in domain.
  keel = await startTestKeel({ jobs: { backoffMs: [200, 200, 200, 200, 200] } });
});
afterAll(async () => {
  await keel?.stop();
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(opts?: Parameters<typeof startWebhookReceiver>[0]) {
  const r = await startWebhookReceiver(opts);
  receivers.push(r);
  return r;
}

/**
 * A job's Schedule as Temporal describes it. A describe is a query of the server's scheduler, which a busy server
 * answers late (DEADLINE_EXCEEDED): read again then, as the paused-routine test does.
 */
function scheduleOf(jobId: string) {
  const handle = keel.client.schedule.getHandle(jobScheduleId(jobId));
  return eventually(
    () =>
      handle.describe().catch((err: unknown) => {
        if (temporalUnavailable(err)) return undefined;
        throw err;
      }),
    60_000,
    `the Schedule of job ${jobId}`,
  );
}

async function api<T = Record<string, unknown>>(
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  url: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const res = await keel.api.inject({
    method,
    url,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json<T>() };
}

interface Job {
  id: string;
  name: string;
  status: string;
  consecutiveErrors: number;
  runCount: number;
  nextRunAt: string | null;
  lastRun?: { status: string; durationMs: number | null };
}
interface Run {
  runId: string;
  firedAt: string;
  status: string;
  reply?: string;
  error?: string;
  delivery: { outcome: string | null; attempts: number };
}

async function createJob(a: string, body: Record<string, unknown>) {
  const res = await api<Job & { error?: { code: string; message: string } }>('POST', `/v1/agents/${a}/jobs`, {
    name: uniqueId('job'),
    schedule: { kind: 'every', intervalMs: 3_600_000 },
    ...body,
  });
  return res;
}

const runs = async (a: string, id: string) => (await api<Run[]>('GET', `/v1/agents/${a}/jobs/${id}/runs`)).body;
const finishedRuns = async (a: string, id: string, n: number) =>
  eventually(
    async () => {
      const r = await runs(a, id);
      return r.filter((x) => x.status !== 'running').length >= n ? r : undefined;
    },
    60_000,
    `${n} finished runs`,
  );

describe('scheduled jobs through the REST API', () => {
  it('an every-60000 job with a webhook, run now: the reply is received once; the run is ok, delivered', async () => {
    const a = uniqueId('a');
    const hook = await receiver();
    const created = await createJob(a, {
      name: 'Morning digest',
      schedule: { kind: 'every', intervalMs: 60_000 },
      task: 'digest please',
      delivery: { channel: 'webhook', url: hook.url },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'Morning digest', status: 'active', runCount: 0 });
    const described = await scheduleOf(created.body.id);
    expect(described.state.paused).toBe(false);

    expect((await api('POST', `/v1/agents/${a}/jobs/${created.body.id}/run`)).status).toBe(202);
    const [run] = await finishedRuns(a, created.body.id, 1);
    expect(run).toMatchObject({
      status: 'ok',
      reply: 'echo: digest please',
      delivery: { outcome: 'delivered', attempts: 1 },
    });
    await hook.waitFor((r) => r.length >= 1, 10_000);
    expect(hook.received.map((r) => (r.body as { text: string }).text)).toEqual(['echo: digest please']);
    const job = (await api<Job>('GET', `/v1/agents/${a}/jobs/${created.body.id}`)).body;
    expect(job).toMatchObject({
      runCount: 1,
      consecutiveErrors: 0,
      lastRun: { status: 'ok', deliveryOutcome: 'delivered' },
    });
    // How long it took, though the run's steps are local ones of its workflow.
    expect(job.lastRun?.durationMs).toBeGreaterThan(0);
  });

  it('a webhook answering 500 twice then 200: the run is ok, delivered after 3 attempts, sent once', async () => {
    const a = uniqueId('a');
    const hook = await receiver({ failFirst: 2, failStatus: 500 });
    const { body: job } = await createJob(a, { task: 'persist', delivery: { channel: 'webhook', url: hook.url } });
    await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`);
    const [run] = await finishedRuns(a, job.id, 1);
    expect(run).toMatchObject({ status: 'ok', delivery: { outcome: 'delivered', attempts: 3 } });
    expect(hook.received.map((r) => r.status)).toEqual([500, 500, 200]);
    expect([...hook.byIdempotencyKey().values()]).toEqual([1]);
  });

  it('a run whose reply begins with "Error:" is ok and delivered: the turn classifies it, not its text', async () => {
    const a = uniqueId('a');
    const hook = await receiver();
    const delivery = { channel: 'webhook', url: hook.url };
    const { body: job } = await createJob(a, { task: 'what went wrong last night?', delivery });
    // The model's own answer, word for word: a plain-text reply that happens to start like an error.
    const text = 'Error: none last night; the backups all finished.';
    const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 };
    const answer = { content: [{ type: 'text' as const, text }], stopReason: 'end_turn' as const, usage };
    await queueAnswer(keel, a, jobConversationId(job.id), answer);
    await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`);
    const [run] = await finishedRuns(a, job.id, 1);
    expect(run).toMatchObject({ status: 'ok', reply: text, delivery: { outcome: 'delivered', attempts: 1 } });
    expect(run?.error).toBeUndefined();
    await hook.waitFor((r) => r.length >= 1, 10_000);
    expect(hook.received.map((r) => (r.body as { text: string }).text)).toEqual([text]);
    const after = (await api<Job>('GET', `/v1/agents/${a}/jobs/${job.id}`)).body;
    expect(after).toMatchObject({ status: 'active', runCount: 1, consecutiveErrors: 0 });
    expect(after).toMatchObject({ lastRun: { status: 'ok', error: null } });
  });

  it('a task failing its first two turns succeeds on its second retry; the error count returns to 0', async () => {
    const a = uniqueId('a');
    const { body: job } = await createJob(a, { task: '/error 2 flaky report' });
    await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`);
    const [run] = await finishedRuns(a, job.id, 1);
    expect(run).toMatchObject({ status: 'ok', reply: 'echo: flaky report' });
    expect((await api<Job>('GET', `/v1/agents/${a}/jobs/${job.id}`)).body).toMatchObject({
      consecutiveErrors: 0,
      status: 'active',
    });
  });

  it('a job failing 10 times in a row becomes failed, its Schedule is paused and the owner hears of it', async () => {
    const a = uniqueId('a');
    const owner = await receiver();
    await keel.api.inject({
      method: 'PUT',
      url: `/v1/agents/${a}`,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'A', owner: { delivery: { channel: 'webhook', url: owner.url } } }),
    });
    const { body: job } = await createJob(a, { name: 'Broken', task: '/error 100 never works' });
    await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`);
    const [run] = await finishedRuns(a, job.id, 1);
    expect(run?.status).toBe('error');
    const after = (await api<Job>('GET', `/v1/agents/${a}/jobs/${job.id}`)).body;
    expect(after).toMatchObject({ status: 'failed', consecutiveErrors: 10 });
    expect((await scheduleOf(job.id)).state.paused).toBe(true);
    await owner.waitFor((r) => r.length >= 1, 10_000);
    expect((owner.received[0]!.body as { text: string }).text).toMatch(
      /^Scheduled job "Broken" failed 10 times in a row and has been stopped/,
    );
    expect((await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`)).status).toBe(409);
  });

  it('a job paused while its failed run waits to retry is not retried', async () => {
    const a = uniqueId('a');
    const { body: job } = await createJob(a, { task: '/error 100 keeps failing' });
    await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`);
    await eventually(
      async () => (await api<Job>('GET', `/v1/agents/${a}/jobs/${job.id}`)).body.consecutiveErrors >= 2 || undefined,
      30_000,
      'two errors',
    );
    expect((await api('POST', `/v1/agents/${a}/jobs/${job.id}/pause`)).status).toBe(200);
    const [run] = await finishedRuns(a, job.id, 1);
    expect(run?.status).toBe('error');
    const after = (await api<Job>('GET', `/v1/agents/${a}/jobs/${job.id}`)).body;
    expect(after.status).toBe('paused');
    expect(after.consecutiveErrors).toBeLessThan(10);
  });

  it('a one-shot fails after 3 consecutive errors', async () => {
    const a = uniqueId('a');
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const { body: job } = await createJob(a, { schedule: { kind: 'at', at }, task: '/error 100 nope' });
    await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`);
    await finishedRuns(a, job.id, 1);
    expect((await api<Job>('GET', `/v1/agents/${a}/jobs/${job.id}`)).body).toMatchObject({
      status: 'failed',
      consecutiveErrors: 3,
    });
  });

  it('two run-nows at the same instant are both recorded: one runs, the other is skipped; a pause stays', async () => {
    const a = uniqueId('a');
    const { body: job } = await createJob(a, { task: '/delay 3000 slow' });
    // Same second on purpose: a Schedule-triggered fire is named by its second, and Temporal dropped the second one.
    const posted = await Promise.all([1, 2].map(() => api('POST', `/v1/agents/${a}/jobs/${job.id}/run`)));
    expect(posted.map((p) => p.status)).toEqual([202, 202]);
    await eventually(
      async () => (await runs(a, job.id)).some((r) => r.status === 'skipped') || undefined,
      20_000,
      'a skipped fire',
    );
    expect((await api('POST', `/v1/agents/${a}/jobs/${job.id}/pause`)).status).toBe(200);
    const all = await finishedRuns(a, job.id, 2);
    expect(all.map((r) => r.status).sort()).toEqual(['ok', 'skipped']);
    // Which of the two began first decides the reason: the later fire finding the earlier one running, or the earlier
    // fire finding that the later one already ran (fires are ordered by their start time).
    expect(['the previous run was still running', 'a later fire has already run']).toContain(
      all.find((r) => r.status === 'skipped')?.error,
    );
    expect((await api<Job>('GET', `/v1/agents/${a}/jobs/${job.id}`)).body.status).toBe('paused');
    expect((await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`)).status).toBe(409);
    const resumed = await api<Job>('POST', `/v1/agents/${a}/jobs/${job.id}/resume`);
    expect(resumed.body.status).toBe('active');
  });
});

describe('job validation through the API', () => {
  it('names each rule with its code and status', async () => {
    const a = uniqueId('a');
    const ok = await createJob(a, { name: 'Weekly', task: 't' });
    expect(ok.status).toBe(201);
    const dup = await createJob(a, { name: 'WEEKLY', task: 't' });
    expect([dup.status, dup.body.error?.code]).toEqual([409, 'job_name_taken']);
    const big = await createJob(a, { task: 'x'.repeat(32_769) });
    expect([big.status, big.body.error?.code]).toEqual([413, 'task_too_large']);
    for (const schedule of [
      { kind: 'cron', expr: '@daily' },
      { kind: 'at', at: '2020-01-01T00:00:00Z' },
      { kind: 'cron', expr: '0 0 30 2 *' },
      { kind: 'cron', expr: '0 9 * * *', tz: 'Not/AZone' },
    ]) {
      const res = await createJob(a, { task: 't', schedule });
      expect([res.status, res.body.error?.code]).toEqual([400, 'invalid_schedule']);
    }
    const slack = await createJob(a, { task: 't', delivery: { channel: 'slack', target: '#general' } });
    expect([slack.status, slack.body.error?.code]).toEqual([400, 'invalid_request']);
    expect(slack.body.error?.message).toMatch(/delivery/);
  });

  it('the 1,001st job of an agent → 429 job_limit', async () => {
    const a = uniqueId('a');
    await keel.pool.query('INSERT INTO agents (id, name) VALUES ($1, $1)', [a]);
    await keel.pool.query(
      `INSERT INTO jobs (id, agent_id, name, schedule, task, delivery, created_by, delivery_chosen_by, status)
       SELECT gen_random_uuid()::text, $1, 'job ' || g, '{"kind":"every","intervalMs":3600000}', 't',
              '{"channel":"none"}', 'user', 'user', 'completed'
         FROM generate_series(1, 1000) g`,
      [a],
    );
    const res = await createJob(a, { task: 't' });
    expect([res.status, res.body.error?.code]).toEqual([429, 'job_limit']);
  });
});

/**
 * An agent's one-shot made by its `schedule` tool (so it deletes itself after its run), delivering to `url` (the
 * destination "results", as the model names it), with an owner delivery of its own to hear notices on; run now.
 */
async function runAgentOneShot(name: string, url: string) {
  const [a, c] = [uniqueId('a'), uniqueId('c')];
  const owner = await receiver();
  const agent = {
    name: 'A',
    owner: { delivery: { channel: 'webhook', url: owner.url } },
    destinations: { results: { channel: 'webhook', url } },
  };
  expect((await api('PUT', `/v1/agents/${a}`, agent)).status).toBe(200);
  const at = new Date(Date.now() + 3_600_000).toISOString();
  const create = { action: 'create', name, schedule: { kind: 'at', at }, task: 'one time only', delivery: 'results' };
  await keel.post(a, c, { text: `/tool schedule ${JSON.stringify(create)}` }, { wait: 30 });
  const [job] = (await api<(Job & { deleteAfterRun: boolean })[]>('GET', `/v1/agents/${a}/jobs`)).body;
  expect(job?.deleteAfterRun).toBe(true);
  expect((await api('POST', `/v1/agents/${a}/jobs/${job!.id}/run`)).status).toBe(202);
  return { a, job: job!, owner };
}

/** The run once booked, or 'gone' when the job (and with it its runs) was deleted instead. */
const bookedOrGone = (a: string, id: string, timeoutMs: number) =>
  eventually(
    async () => {
      if ((await api('GET', `/v1/agents/${a}/jobs/${id}`)).status === 404) return 'gone' as const;
      return (await runs(a, id)).find((r) => r.status !== 'running');
    },
    timeoutMs,
    'the run booked or the job gone',
  );

describe("the agent's schedule tool", () => {
  it('creates a job by tool call, in GET jobs with its Schedule; list, pause and delete work by name', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const create = {
      action: 'create',
      name: 'Standup reminder',
      schedule: { kind: 'cron', expr: '0 9 * * MON-FRI', tz: 'Europe/Berlin' },
      task: 'Remind the team about the standup.',
    };
    const res = await keel.post(a, c, { text: `/tool schedule ${JSON.stringify(create)}` }, { wait: 30 });
    expect(res.body.reply?.text).toMatch(
      /^tool result: created job Standup reminder \(id \S+, active, next run \d{4}-/,
    );
    const jobs = (await api<(Job & { createdBy: string; deleteAfterRun: boolean })[]>('GET', `/v1/agents/${a}/jobs`))
      .body;
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({
      name: 'Standup reminder',
      createdBy: 'agent',
      status: 'active',
      deleteAfterRun: false,
    });
    const schedule = await scheduleOf(jobs[0]!.id);
    expect(schedule.spec.calendars?.length).toBeGreaterThan(0);
    expect(schedule.action).toMatchObject({ type: 'startWorkflow', workflowType: 'jobRunWorkflow' });

    const bad = await keel.post(
      a,
      c,
      {
        text: `/tool schedule ${JSON.stringify({
          ...create,
          name: 'Other',
          schedule: { kind: 'cron', expr: '@daily' },
        })}`,
      },
      { wait: 30 },
    );
    expect(bad.body.reply?.text).toMatch(/^tool error: .*nicknames/);
    expect(
      (await keel.post(a, c, { text: '/tool schedule {"action":"pause","name":"standup REMINDER"}' }, { wait: 30 }))
        .body.reply?.text,
    ).toMatch(/^tool result: paused Standup reminder/);
    expect((await scheduleOf(jobs[0]!.id)).state.paused).toBe(true);
    expect(
      (await keel.post(a, c, { text: '/tool schedule {"action":"list"}' }, { wait: 30 })).body.reply?.text,
    ).toMatch(/Standup reminder \(id \S+, paused/);
    expect(
      (await keel.post(a, c, { text: '/tool schedule {"action":"delete","name":"Standup reminder"}' }, { wait: 30 }))
        .body.reply?.text,
    ).toBe('tool result: deleted job Standup reminder');
    expect((await api<Job[]>('GET', `/v1/agents/${a}/jobs`)).body).toEqual([]);
  });

  it("an agent's one-shot whose webhook always answers 503 is kept, failed, with its run and a notice", async () => {
    const hook = await receiver({ failFirst: Infinity, failStatus: 503 });
    const { a, job, owner } = await runAgentOneShot('Undeliverable', hook.url);
    // Six send attempts, Temporal's delivery retries 1 + 2 + 4 + 8 + 16 s apart.
    const run = await bookedOrGone(a, job.id, 75_000);
    expect(run).toMatchObject({ status: 'ok', reply: 'echo: one time only' });
    expect(run).toMatchObject({ delivery: { outcome: 'error:http_503', attempts: 6 } });
    expect(hook.received.map((r) => r.status)).toEqual([503, 503, 503, 503, 503, 503]);
    const kept = await api<Job>('GET', `/v1/agents/${a}/jobs/${job.id}`);
    expect([kept.status, kept.body.status]).toEqual([200, 'failed']);
    expect(kept.body).toMatchObject({ nextRunAt: null, lastRun: { status: 'ok', deliveryOutcome: 'error:http_503' } });
    // The notice goes before the run is booked, so by now a second one would have arrived.
    expect(owner.received.map((r) => (r.body as { text: string }).text)).toEqual([
      'Scheduled job "Undeliverable" ran, but its result could not be delivered (error:http_503); ' +
        'the job has been kept as failed, with its run.',
    ]);
    const audit = 'SELECT action FROM job_audit WHERE job_id = $1 ORDER BY id';
    const { rows } = await keel.pool.query<{ action: string }>(audit, [job.id]);
    expect(rows.map((r) => r.action)).toEqual(['create', 'run', 'fail']);
    expect((await api('POST', `/v1/agents/${a}/jobs/${job.id}/run`)).status).toBe(409);
  });

  it("an agent's one-shot whose webhook answers 404 is kept, failed, with its run (dropped:http_404)", async () => {
    const hook = await receiver({ failFirst: Infinity, failStatus: 404 });
    const { a, job, owner } = await runAgentOneShot('Refused', hook.url);
    const run = await bookedOrGone(a, job.id, 30_000);
    expect(run).toMatchObject({ status: 'ok', reply: 'echo: one time only' });
    expect(run).toMatchObject({ delivery: { outcome: 'dropped:http_404', attempts: 1 } });
    expect(hook.received.map((r) => r.status)).toEqual([404]);
    const kept = await api<Job>('GET', `/v1/agents/${a}/jobs/${job.id}`);
    expect([kept.status, kept.body.status]).toEqual([200, 'failed']);
    expect(owner.received.map((r) => (r.body as { text: string }).text)).toEqual([
      'Scheduled job "Refused" ran, but its result could not be delivered (dropped:http_404); ' +
        'the job has been kept as failed, with its run.',
    ]);
    expect((await scheduleOf(job.id)).state.paused).toBe(true);
  });

  it("an agent's one-shot deletes itself after its run, once its delivery outcome is recorded", async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const hook = await receiver();
    const destinations = { results: { channel: 'webhook', url: hook.url } };
    expect((await api('PUT', `/v1/agents/${a}`, { name: 'A', destinations })).status).toBe(200);
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const create = {
      action: 'create',
      name: 'Once',
      schedule: { kind: 'at', at },
      task: 'one time only',
      delivery: 'results',
    };
    await keel.post(a, c, { text: `/tool schedule ${JSON.stringify(create)}` }, { wait: 30 });
    const [job] = (await api<(Job & { deleteAfterRun: boolean })[]>('GET', `/v1/agents/${a}/jobs`)).body;
    expect(job?.deleteAfterRun).toBe(true);
    await api('POST', `/v1/agents/${a}/jobs/${job!.id}/run`);
    await eventually(
      async () => (await api('GET', `/v1/agents/${a}/jobs/${job!.id}`)).status === 404 || undefined,
      30_000,
      'the job to be gone',
    );
    expect(hook.received.map((r) => (r.body as { text: string }).text)).toEqual(['echo: one time only']);
    const { rows } = await keel.pool.query<{ action: string }>(
      'SELECT action FROM job_audit WHERE job_id = $1 ORDER BY id',
      [job!.id],
    );
    expect(rows.map((r) => r.action)).toEqual(['create', 'run', 'delete-after-run']);
  });
});
