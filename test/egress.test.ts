import { createServer, type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi, type MockInstance } from 'vitest';
import { slackTransport } from '../adapters/delivery/slack';
import { webhookTransport } from '../adapters/delivery/webhook';
import { createAnthropicProvider } from '../adapters/model/anthropic';
import { parseEgressAllow } from '../domain/egress';
import { ModelRequestError, type ModelCallContext } from '../domain/model';
import {
  createEgressGuard,
  egressFailureOf,
  EgressRedirectError,
  EgressRefusedError,
  type EgressGuard,
  type Resolver,
} from '../adapters/egress';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { author, finished, routineApi } from './support/routines';

// No test here opens a connection to anything but loopback: names resolve through a fake resolver, and where the
// guard lets a non-loopback address through, a connector that opens nothing receives it.

/** A resolver that answers from a table (a list per call: the last one repeats), recording what it was asked. */
function fakeResolver(table: Record<string, string[] | string[][]>) {
  const asked: string[] = [];
  const calls = new Map<string, number>();
  const resolve: Resolver = async (hostname) => {
    asked.push(hostname);
    const answers = table[hostname];
    if (!answers) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    const n = calls.get(hostname) ?? 0;
    calls.set(hostname, n + 1);
    const list = Array.isArray(answers[0]) ? (answers as string[][]) : [answers as string[]];
    return list[Math.min(n, list.length - 1)]!.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { resolve, asked };
}

const message = { agentId: 'a1', conversationId: 'c1', turnId: 't1', text: 'hello', idempotencyKey: 'k1' };
const live = () => new AbortController().signal;

let netConnect: MockInstance<typeof net.connect>;
let tlsConnect: MockInstance<typeof tls.connect>;
const guards: EgressGuard[] = [];
/** A guard with an allow list and a fake resolver, closed after the test. */
function guard(
  allow: string,
  table: Record<string, string[] | string[][]>,
  connector?: Parameters<typeof createEgressGuard>[0]['connector'],
) {
  const resolver = fakeResolver(table);
  const g = createEgressGuard({ allow: parseEgressAllow(allow), resolve: resolver.resolve, connector });
  guards.push(g);
  return { guard: g, asked: resolver.asked };
}
/** The hosts the system was asked to open sockets to (plain and TLS). */
const sockets = () =>
  [...netConnect.mock.calls, ...tlsConnect.mock.calls].map(([options]: unknown[]) =>
    typeof options === 'object' && options !== null ? (options as { host?: string }).host : String(options),
  );

beforeEach(() => {
  netConnect = vi.spyOn(net, 'connect');
  tlsConnect = vi.spyOn(tls, 'connect');
});
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(guards.splice(0).map((g) => g.close()));
});

async function refusalOf(promise: Promise<unknown>): Promise<EgressRefusedError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  const refused = egressFailureOf(err);
  expect(refused).toBeInstanceOf(EgressRefusedError);
  return refused as EgressRefusedError;
}

describe('the egress guard refuses non-public addresses after resolving, before any socket', () => {
  it.each([
    ['internal.test', '10.0.0.5', 'private'],
    ['metadata.test', '169.254.169.254', 'cloud_metadata'],
    ['ecs-metadata.test', '169.254.170.2', 'cloud_metadata'],
    ['aws6-metadata.test', 'fd00:ec2::254', 'cloud_metadata'],
    ['alibaba-metadata.test', '100.100.100.200', 'cloud_metadata'],
    ['self.test', '::1', 'loopback'],
    ['self4.test', '127.0.0.1', 'loopback'],
    ['linklocal.test', '169.254.10.20', 'link_local'],
    ['linklocal6.test', 'fe80::1', 'link_local'],
    ['cgnat.test', '100.64.0.7', 'cgnat'],
    ['ula.test', 'fd12:3456::1', 'unique_local'],
    ['multicast.test', '224.0.0.251', 'multicast'],
    ['zero.test', '0.0.0.0', 'unspecified'],
    ['mapped.test', '::ffff:10.0.0.5', 'private'],
  ])('%s → %s is refused as %s', async (host, address, cls) => {
    const { guard: g, asked } = guard('', { [host]: [address] });
    for (const url of [`http://${host}:8080/hook`, `https://${host}/hook`]) {
      const refused = await refusalOf(g.fetch(url, { method: 'POST', body: 'x' }));
      expect(refused.reason).toBe(`egress_refused:${cls}`);
      expect(refused.refusal).toMatchObject({ host, addressClass: cls });
    }
    expect(asked).toEqual([host, host]);
    expect(sockets()).toEqual([]);
  });

  it('checks an address written in the URL without asking DNS', async () => {
    const { guard: g, asked } = guard('', {});
    for (const [url, cls] of [
      ['http://10.0.0.5/hook', 'private'],
      ['http://[::1]:9000/hook', 'loopback'],
      ['http://169.254.169.254/latest/meta-data/', 'cloud_metadata'],
      ['http://[fd00:ec2::254]/latest', 'cloud_metadata'],
      ['http://0x7f.1/', 'loopback'],
      ['https://192.168.1.1/', 'private'],
    ]) {
      expect((await refusalOf(g.fetch(url!))).reason).toBe(`egress_refused:${cls}`);
    }
    expect(asked).toEqual([]);
    expect(sockets()).toEqual([]);
  });

  it('refuses a name answering one public and one private address (every address is checked)', async () => {
    const { guard: g } = guard('', { 'mixed.test': ['93.184.215.14', '10.0.0.5'] });
    expect((await refusalOf(g.fetch('http://mixed.test/'))).refusal).toMatchObject({
      address: '10.0.0.5',
      addressClass: 'private',
    });
    expect(sockets()).toEqual([]);
  });

  it('passes what KEEL_EGRESS_ALLOW opens, and hands the connector the address it checked', async () => {
    const opened: string[] = [];
    const noSocket: Parameters<typeof createEgressGuard>[0]['connector'] = (options, callback) => {
      opened.push(options.hostname);
      callback(new Error('test connector: no socket is opened'), null);
    };
    const { guard: g } = guard(
      '10.20.0.0/16,erp.corp.test,*.hooks.test,169.254.0.0/16',
      {
        'billing.test': ['10.20.3.4'],
        'other.test': ['10.21.0.1'],
        'erp.corp.test': ['192.168.7.7'],
        'a.hooks.test': ['172.16.0.9'],
        'hooks.test': ['172.16.0.9'],
        'metadata.test': ['169.254.169.254'],
        'public.test': ['93.184.215.14'],
      },
      noSocket,
    );
    const outcome = (url: string) =>
      g.fetch(url).then(
        () => 'answered',
        (e: unknown) => egressFailureOf(e)?.reason ?? 'connect attempted',
      );
    expect(await outcome('http://billing.test/')).toBe('connect attempted');
    expect(await outcome('http://other.test/')).toBe('egress_refused:private');
    expect(await outcome('http://erp.corp.test/')).toBe('connect attempted');
    expect(await outcome('http://a.hooks.test/')).toBe('connect attempted');
    expect(await outcome('http://hooks.test/')).toBe('egress_refused:private');
    // A wide range never opens a metadata address: only an entry naming the address itself does.
    expect(await outcome('http://metadata.test/')).toBe('egress_refused:cloud_metadata');
    expect(await outcome('http://public.test/')).toBe('connect attempted');
    expect(opened).toEqual(['10.20.3.4', '192.168.7.7', '172.16.0.9', '93.184.215.14']);
    expect(sockets()).toEqual([]);
  });
});

describe('against a loopback server', () => {
  let server: Server;
  let port: number;
  const seen: { url: string; host: string | undefined }[] = [];
  let answer: (url: string) => { status: number; headers?: Record<string, string> } = () => ({ status: 200 });
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ url: req.url ?? '', host: req.headers.host });
      const { status, headers } = answer(req.url ?? '');
      req.resume();
      res.writeHead(status, { connection: 'close', ...headers }).end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  beforeEach(() => {
    seen.length = 0;
    answer = () => ({ status: 200 });
  });

  it('DNS rebinding: the socket goes to the address that was checked; a new answer is checked again', async () => {
    // The first answer is loopback (allowed); then the name "rebinds" to a private address.
    const { guard: g, asked } = guard('loopback', { 'hooks.test': [['127.0.0.1'], ['10.0.0.5']] });
    const res = await g.fetch(`http://hooks.test:${port}/first`, { method: 'POST', body: 'x' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('ok');
    // The socket was opened to the checked address itself, so nothing resolved the name a second time.
    expect(sockets()).toEqual(['127.0.0.1']);
    expect(seen).toEqual([{ url: '/first', host: `hooks.test:${port}` }]);

    // The server closed that connection: the next request resolves again, and the new answer is refused.
    await eventually(async () => {
      const again = await g.fetch(`http://hooks.test:${port}/second`).then(
        () => undefined,
        (e: unknown) => egressFailureOf(e),
      );
      return again?.reason === 'egress_refused:private';
    }, 5_000);
    expect(asked.slice(0, 2)).toEqual(['hooks.test', 'hooks.test']);
    expect(sockets()).toEqual(['127.0.0.1']);
    expect(seen.map((s) => s.url)).toEqual(['/first']);
  });

  it('does not follow a redirect to a name that resolves to a private address', async () => {
    answer = () => ({ status: 302, headers: { location: 'http://internal.test/steal' } });
    const { guard: g, asked } = guard('loopback', { 'hooks.test': ['127.0.0.1'], 'internal.test': ['10.0.0.5'] });
    const err = await g.fetch(`http://hooks.test:${port}/hook`, { method: 'POST', body: 'x' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EgressRedirectError);
    expect(err).toMatchObject({
      status: 302,
      location: 'http://internal.test/steal',
      reason: 'redirect_not_followed:http_302',
      message: 'redirect not followed: 302 to http://internal.test/steal',
    });
    expect(asked).toEqual(['hooks.test']);
    expect(sockets()).toEqual(['127.0.0.1']);

    // A webhook answered with a redirect is dropped for good, naming it, after one request.
    seen.length = 0;
    const result = await webhookTransport({ egress: g }).send(
      { channel: 'webhook', url: `http://hooks.test:${port}/hook`, secret: 's3cret' },
      message,
      live(),
    );
    expect(result).toEqual({ ok: false, retryable: false, reason: 'redirect_not_followed:http_302' });
    expect(seen).toHaveLength(1);
    expect(asked).not.toContain('internal.test');
  });
});

describe('every outbound client goes through the guard', () => {
  it('webhook: a refused address is dropped (not retried), naming the class; no socket', async () => {
    const { guard: g } = guard('loopback', { 'collector.test': ['169.254.169.254'] });
    const result = await webhookTransport({ egress: g }).send(
      { channel: 'webhook', url: 'http://collector.test/x' },
      message,
      live(),
    );
    expect(result).toEqual({ ok: false, retryable: false, reason: 'egress_refused:cloud_metadata' });
    expect(sockets()).toEqual([]);
  });

  it("slack: KEEL_SLACK_API_URL's host is checked like any other", async () => {
    const { guard: g } = guard('', { 'slack.test': ['10.1.2.3'] });
    const result = await slackTransport({ token: 'xoxb-test', apiUrl: 'http://slack.test/api/', egress: g }).send(
      { channel: 'slack', target: 'C0TEST1' },
      message,
      live(),
    );
    expect(result).toEqual({ ok: false, retryable: false, reason: 'egress_refused:private' });
    expect(sockets()).toEqual([]);
  });

  it('anthropic: a base URL on a refused address is a request error (not retried)', async () => {
    const { guard: g } = guard('', { 'anthropic.test': ['192.168.1.10'] });
    const provider = createAnthropicProvider({
      apiKey: 'sk-ant-test',
      baseURL: 'http://anthropic.test',
      defaultModel: 'claude-test',
      egress: g,
    });
    const ctx: ModelCallContext = {
      attempt: 1,
      conversationKey: 'c',
      turnId: 't',
      callIndex: 1,
      onTextDelta: () => undefined,
      heartbeat: () => undefined,
      signal: live(),
      sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
    };
    const request = {
      model: 'claude-test',
      system: '',
      messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'hi' }] }],
      tools: [],
      maxTokens: 16,
    };
    const err = await provider.call(request, ctx).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModelRequestError);
    expect((err as Error).message).toBe(
      'anthropic: egress refused: anthropic.test (192.168.1.10) is private (RFC 1918: 10/8, 172.16/12, ' +
        '192.168/16); Keel connects only to public addresses unless KEEL_EGRESS_ALLOW lists the host, address or range',
    );
    expect(sockets()).toEqual([]);
  });
});

describe('through Keel: a reply delivery and a routine integration', () => {
  let keel: TestKeel;
  let egress: EgressGuard;
  const r = routineApi(() => keel);
  beforeAll(async () => {
    const resolver = fakeResolver({ 'collector.test': ['10.0.0.5'], 'erp.test': ['169.254.169.254'] });
    egress = createEgressGuard({ allow: parseEgressAllow('loopback'), resolve: resolver.resolve });
    keel = await startTestKeel({
      egress,
      routines: { integrations: { erp: 'http://erp.test/sync' } },
    });
  });
  afterAll(async () => {
    await keel?.stop();
    await egress?.close();
  });

  it('a reply to a webhook whose name resolves to a private address ends dropped:egress_refused:private', async () => {
    const a = uniqueId('a');
    const res = await keel.post(
      a,
      'c1',
      { text: 'hello', delivery: { channel: 'webhook', url: 'http://collector.test/x' } },
      { wait: 30 },
    );
    expect(res.status).toBe(200);
    expect(res.body.reply).toEqual({
      text: 'echo: hello',
      delivery: { outcome: 'dropped:egress_refused:private', attempts: 1 },
    });
  });

  it("a routine's integrations.call to a metadata address fails with the guard's reason, catchable", async () => {
    const a = uniqueId('a');
    const tables = [{ name: 'notes', columns: ['text'] }];
    expect((await r.call('PUT', `/v1/agents/${a}/apps/ops`, { name: 'Ops', tables })).status).toBe(200);
    const tool = {
      name: 'syncErp',
      code: `async function syncErp() {
        try { await integrations.call('erp', { ping: 1 }); return 'called'; } catch (e) { return e.message; }
      }`,
    };
    expect((await r.routine(a, 'ops', 'sync', { prompt: `Sync ${author(tool)}` })).status).toBe(201);
    const run = await r.runNow(a, 'ops', 'sync', finished);
    expect(run).toMatchObject({
      status: 'ok',
      digest:
        'integration "erp": egress refused: erp.test (169.254.169.254) is cloud metadata (169.254.169.254, ' +
        '169.254.170.2, fd00:ec2::254, 100.100.100.200); Keel connects only to public addresses unless ' +
        'KEEL_EGRESS_ALLOW lists the address itself',
    });
  });
});
