import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sealStoredSecrets } from '../services/delivery-secrets';
import { secretBoxOf } from '../services/secrets';
import { conversationWorkflowId } from '../domain/ids';
import { startTestKeel, TEST_SECRETS_KEY, uniqueId, type TestKeel } from './support/keel';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

/**
 * Webhook secrets at rest: what a person sets through the API is sealed before anything keeps it. No table of
 * PostgreSQL and no Temporal payload holds it in clear (this Keel's payloads are not encrypted, so the history shows
 * what a workflow itself carries), answers show its fingerprint, and deliveries still sign with it.
 */
const SECRETS = {
  owner: 'owner-at-rest-8d1f3a',
  destination: 'destination-at-rest-41c7e2',
  job: 'job-at-rest-e95b06',
  routine: 'routine-at-rest-0b7d5c',
  message: 'message-at-rest-6a2e98',
};
const sha8 = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 8);

let keel: TestKeel;
const receivers: WebhookReceiver[] = [];
beforeAll(async () => {
  keel = await startTestKeel();
});
afterAll(async () => {
  await keel?.stop();
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(secret: string): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver({ secret, rejectUnverified: true });
  receivers.push(r);
  return r;
}

/** The tables of Keel's schema in which a value appears anywhere in a row's text. */
async function tablesHolding(value: string): Promise<string[]> {
  const { rows: tables } = await keel.pool.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`,
  );
  expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['agents', 'jobs', 'turns', 'deliveries']));
  const holding: string[] = [];
  for (const { name } of tables) {
    const { rowCount } = await keel.pool.query(`SELECT 1 FROM "${name}" x WHERE strpos(x::text, $1) > 0 LIMIT 1`, [
      value,
    ]);
    if (rowCount) holding.push(name);
  }
  return holding;
}

/** Every payload of a workflow's history as text, as a reader of Temporal's store would find it. */
async function historyText(workflowId: string): Promise<string> {
  const history = await keel.client.workflow.getHandle(workflowId).fetchHistory();
  const texts: string[] = [];
  const walk = (v: unknown): void => {
    if (v instanceof Uint8Array) texts.push(Buffer.from(v).toString('utf8'));
    else if (Array.isArray(v)) v.forEach(walk);
    else if (typeof v === 'object' && v !== null) Object.values(v).forEach(walk);
  };
  walk(history.events);
  return texts.join('\n');
}

const hook = (url: string, secret: string) => ({ channel: 'webhook', url, secret });

describe('webhook secrets at rest', () => {
  it('are sealed everywhere Keel keeps them, shown by fingerprint, and still sign what is delivered', async () => {
    const agent = uniqueId('a');
    const conversation = uniqueId('c');
    const toMessage = await receiver(SECRETS.message);
    const toJob = await receiver(SECRETS.job);
    const put = await keel.call('PUT', `/v1/agents/${agent}`, {
      name: agent,
      owner: { delivery: hook('https://hooks.example.com/owner', SECRETS.owner) },
      destinations: { ops: hook('https://hooks.example.com/ops', SECRETS.destination) },
    });
    expect(put.status, put.raw).toBe(200);
    // Put again unchanged: the same secret seals to the same stored value, so nothing shows as changed.
    const again = await keel.call('PUT', `/v1/agents/${agent}`, {
      name: agent,
      owner: { delivery: hook('https://hooks.example.com/owner', SECRETS.owner) },
      destinations: { ops: hook('https://hooks.example.com/ops', SECRETS.destination) },
    });
    expect(again.status, again.raw).toBe(200);
    const trail = await keel.call<{ entries: { action: string }[] }>('GET', `/v1/agents/${agent}/audit`);
    expect(trail.body.entries.filter((e) => e.action === 'agent.destinations')).toHaveLength(1);

    const job = await keel.call<{ id: string }>('POST', `/v1/agents/${agent}/jobs`, {
      name: 'report',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: 'report',
      delivery: hook(toJob.url, SECRETS.job),
    });
    expect(job.status, job.raw).toBe(201);
    expect((await keel.call('PUT', `/v1/agents/${agent}/apps/crm`, { name: 'crm', tables: [] })).status).toBe(200);
    const routine = await keel.call('PUT', `/v1/agents/${agent}/apps/crm/routines/nightly`, {
      label: 'nightly',
      schedule: { expr: 'daily' },
      prompt: 'summarise the day',
      delivery: hook('https://hooks.example.com/routine', SECRETS.routine),
    });
    expect(routine.status, routine.raw).toBe(201);

    const answer = await keel.post(
      agent,
      conversation,
      { text: 'hello', delivery: hook(toMessage.url, SECRETS.message) },
      {
        wait: 30,
      },
    );
    expect(answer.body.reply?.delivery.outcome).toBe('delivered');
    expect(toMessage.received.map((r) => [r.status, r.validSignature])).toEqual([[200, true]]);
    expect((await keel.call('POST', `/v1/agents/${agent}/jobs/${job.body.id}/run`)).status).toBeLessThan(300);
    await toJob.waitFor((got) => got.length > 0, 60_000);
    expect(toJob.received.map((r) => [r.status, r.validSignature])).toEqual([[200, true]]);

    for (const secret of Object.values(SECRETS)) expect(await tablesHolding(secret), secret).toEqual([]);
    // Sealed, not dropped: the tables hold each secret's sealed form, named by its fingerprint.
    expect(await tablesHolding(`keel-sealed:${sha8(SECRETS.message)}:`)).toEqual(
      expect.arrayContaining(['conversations', 'inbound_messages', 'turns', 'deliveries', 'effects']),
    );
    const history = await historyText(conversationWorkflowId(agent, conversation));
    expect(history).toContain('hello');
    for (const secret of Object.values(SECRETS)) expect(history).not.toContain(secret);

    const shown = await keel.call<{ owner: { delivery: unknown }; destinations: Record<string, unknown> }>(
      'GET',
      `/v1/agents/${agent}`,
    );
    expect(shown.body.owner.delivery).toEqual({
      channel: 'webhook',
      url: 'https://hooks.example.com/owner',
      hasSecret: true,
      secretFingerprint: sha8(SECRETS.owner),
    });
    expect(shown.body.destinations.ops).toMatchObject({ secretFingerprint: sha8(SECRETS.destination) });
  });

  it('refuses a secret that would pass for a sealed one', async () => {
    const agent = uniqueId('a');
    const res = await keel.call<{ error: { code: string; message: string } }>('PUT', `/v1/agents/${agent}`, {
      name: agent,
      owner: { delivery: hook('https://hooks.example.com/owner', 'keel-sealed:00000000:v1.x') },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain('no secret may begin keel-sealed:');
  });

  it('seals, once, the secrets stored in clear before, and what was sealed still signs', async () => {
    const agent = uniqueId('a');
    const clear = 'legacy-clear-secret-3f0a77';
    const legacy = await receiver(clear);
    expect((await keel.call('PUT', `/v1/agents/${agent}`, { name: agent })).status).toBe(200);
    // As a Keel before sealing kept it: in clear, in the agent's row.
    await keel.pool.query('UPDATE agents SET owner_delivery = $2::jsonb WHERE id = $1', [
      agent,
      JSON.stringify(hook(legacy.url, clear)),
    ]);
    await keel.pool.query("DELETE FROM maintenance_passes WHERE name = 'webhook-secrets-sealed'");
    expect(await tablesHolding(clear)).toEqual(['agents']);

    const pass = await sealStoredSecrets(keel.pool, secretBoxOf(TEST_SECRETS_KEY));
    expect(pass.sealed).toBeGreaterThanOrEqual(1);
    expect(pass.waiting).toBe(0);
    expect(await tablesHolding(clear)).toEqual([]);
    expect(await sealStoredSecrets(keel.pool, secretBoxOf(TEST_SECRETS_KEY))).toEqual({ sealed: 0, waiting: 0 });
    const shown = await keel.call<{ owner: { delivery: { secretFingerprint: string } } }>('GET', `/v1/agents/${agent}`);
    expect(shown.body.owner.delivery.secretFingerprint).toBe(sha8(clear));

    // A job delivering to the owner signs with the secret the pass sealed.
    const job = await keel.call<{ id: string }>('POST', `/v1/agents/${agent}/jobs`, {
      name: 'legacy',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: 'report',
      delivery: 'owner',
    });
    expect(job.status, job.raw).toBe(201);
    expect((await keel.call('POST', `/v1/agents/${agent}/jobs/${job.body.id}/run`)).status).toBeLessThan(300);
    await legacy.waitFor((got) => got.length > 0, 60_000);
    expect(legacy.received.map((r) => [r.status, r.validSignature])).toEqual([[200, true]]);
  });
});

describe('without KEEL_SECRETS_KEY', () => {
  let keyless: TestKeel;
  beforeAll(async () => {
    keyless = await startTestKeel({ secretsKey: null, worker: false });
  });
  afterAll(async () => keyless?.stop());

  it('a webhook secret is refused, naming the setting; a webhook without one is stored', async () => {
    const agent = uniqueId('a');
    const refused = await keyless.call<{ error: { code: string; message: string } }>('PUT', `/v1/agents/${agent}`, {
      name: agent,
      owner: { delivery: hook('https://hooks.example.com/owner', 'a-secret-with-no-key') },
    });
    expect(refused.status).toBe(503);
    expect(refused.body.error).toEqual({
      code: 'secrets_unavailable',
      message: 'secrets cannot be stored or read: KEEL_SECRETS_KEY is not set',
    });
    const unsigned = await keyless.call('PUT', `/v1/agents/${agent}`, {
      name: agent,
      owner: { delivery: { channel: 'webhook', url: 'https://hooks.example.com/owner' } },
    });
    expect(unsigned.status, unsigned.raw).toBe(200);
    const { rows } = await keyless.pool.query('SELECT owner_delivery FROM agents WHERE id = $1', [agent]);
    expect(rows).toEqual([{ owner_delivery: { channel: 'webhook', url: 'https://hooks.example.com/owner' } }]);
  });
});
