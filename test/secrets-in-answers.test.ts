import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKeel, uniqueId, type ApiMethod, type TestKeel } from './support/keel';
import { startShopHttp } from './support/mcp-shop';

/**
 * Secrets a person sets (webhook secrets of the owner delivery, a destination, a job and a routine; a tool server's
 * header) are in no answer: every GET operation of the OpenAPI document, its parameters filled with the ids these
 * things really have, is searched for them. A webhook shows `hasSecret` and a fingerprint instead.
 */
const SECRETS = {
  owner: 'owner-secret-2f9c41',
  destination: 'destination-secret-77ab0e',
  job: 'job-secret-c03d19',
  routine: 'routine-secret-5e6a22',
  header: 'Bearer tool-header-secret-91d4',
};

const OPERATOR = 'secrets-walk-operator-token';
let keel: TestKeel;
let shop: Awaited<ReturnType<typeof startShopHttp>>;
/** The API's request log at debug level: it must hold no secret and no token either. */
const log: string[] = [];
beforeAll(async () => {
  keel = await startTestKeel({
    tokens: new Map([[OPERATOR, '*']]),
    apiLog: new Writable({
      write(chunk: Buffer, _enc, done) {
        log.push(chunk.toString('utf8'));
        done();
      },
    }),
  });
  shop = await startShopHttp();
});
afterAll(async () => {
  await keel?.stop();
  await shop?.close();
});

/** A request with the operator's token, as a person's client makes it. */
async function call<T = unknown>(method: ApiMethod, url: string, body?: unknown) {
  const res = await keel.api.inject({
    method,
    url,
    headers: {
      authorization: `Bearer ${OPERATOR}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json<T>(), raw: res.body };
}

const hook = (secret: string) => ({ channel: 'webhook', url: 'https://hooks.example.com/in', secret });

describe('secrets in answers', () => {
  it('no GET answers a secret it was given; webhooks show hasSecret and a fingerprint', async () => {
    const agent = uniqueId('a');
    const app = 'crm';
    const slug = 'nightly';
    const server = 'shop';
    const conversation = uniqueId('c');
    const put = await call('PUT', `/v1/agents/${agent}`, {
      name: agent,
      owner: { delivery: hook(SECRETS.owner) },
      destinations: { ops: hook(SECRETS.destination) },
    });
    expect(put.status, put.raw).toBe(200);
    const job = await call<{ id: string }>('POST', `/v1/agents/${agent}/jobs`, {
      name: 'report',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: 'report',
      delivery: hook(SECRETS.job),
    });
    expect(job.status, job.raw).toBe(201);
    expect((await call('PUT', `/v1/agents/${agent}/apps/${app}`, { name: app, tables: [] })).status).toBe(200);
    const routine = await call('PUT', `/v1/agents/${agent}/apps/${app}/routines/${slug}`, {
      label: slug,
      schedule: { expr: 'daily' },
      prompt: 'summarise the day',
      delivery: hook(SECRETS.routine),
    });
    expect(routine.status, routine.raw).toBeLessThan(300);
    const tools = await call('PUT', `/v1/agents/${agent}/tool-servers/${server}`, {
      url: shop.url,
      headers: { authorization: SECRETS.header },
    });
    expect(tools.status, tools.raw).toBe(201);
    await keel.post(agent, conversation, { text: 'hello' }, { wait: 30, token: OPERATOR });

    const values: Record<string, string> = {
      agentId: agent,
      id: job.body.id,
      appId: app,
      slug,
      name: server,
      conversationId: conversation,
    };
    const doc = (await keel.api.inject({ method: 'GET', url: '/docs/json' })).json<{
      paths: Record<string, Record<string, unknown>>;
    }>();
    const gets = Object.entries(doc.paths)
      .filter(([path, methods]) => 'get' in methods && path.startsWith('/v1/') && !path.endsWith('/events'))
      .map(([path]) => path.replace(/\{(\w+)\}/g, (_m, p: string) => encodeURIComponent(values[p] ?? `x${p}`)));
    expect(gets.length).toBeGreaterThan(30);
    const answered: string[] = [];
    for (const url of gets) {
      const res = await call('GET', url);
      if (res.status === 200) answered.push(url);
      for (const secret of Object.values(SECRETS)) expect(res.raw, `${url} answers a secret`).not.toContain(secret);
    }
    // The walk reached the things that hold secrets.
    expect(answered).toEqual(
      expect.arrayContaining([
        `/v1/agents/${agent}`,
        `/v1/agents/${agent}/jobs/${job.body.id}`,
        `/v1/agents/${agent}/apps/${app}/routines/${slug}`,
        `/v1/agents/${agent}/tool-servers/${server}`,
      ]),
    );
    // Nor is any of them, or the token, in the API's request log.
    expect(log.length).toBeGreaterThan(10);
    for (const secret of [...Object.values(SECRETS), OPERATOR]) expect(log.join('')).not.toContain(secret);
    const shown = (await call<{ owner: { delivery: unknown } }>('GET', `/v1/agents/${agent}`)).body;
    expect(shown.owner.delivery).toEqual({
      channel: 'webhook',
      url: 'https://hooks.example.com/in',
      hasSecret: true,
      secretFingerprint: expect.stringMatching(/^[0-9a-f]{8}$/) as string,
    });
  });
});
