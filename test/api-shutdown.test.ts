import { randomUUID } from 'node:crypto';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { freePort } from '../scripts/ports';
import { spawnTs, stopProcess } from '../scripts/processes';
import { eventually, startTestKeel, streamingText, uniqueId, type TestKeel } from './support/keel';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

interface ErrorBody {
  error: { code: string; message: string; details?: { messageId?: string } };
}

async function testKeel(): Promise<TestKeel> {
  const keel = await startTestKeel();
  cleanups.push(() => keel.stop());
  return keel;
}

const submit = (a: string, c: string, wait: number) => `/v1/agents/${a}/conversations/${c}/messages?wait=${wait}`;

describe('while the API shuts down', () => {
  it("a request arriving during close gets 503 shutting_down in Keel's shape; a waiting one answers now", async () => {
    const keel = await testKeel();
    await keel.api.listen({ host: '127.0.0.1', port: 0 });
    const { port } = keel.api.server.address() as AddressInfo;
    const [a, c] = [uniqueId('a'), uniqueId('c')];

    // A submission waiting for a turn far longer than a shutdown may take.
    const waiting = post(`http://127.0.0.1:${port}${submit(a, c, 30)}`, { text: '/delay 10000 slow' });
    // A request whose last bytes arrive once close has begun (a slow client; its connection is not idle, so it stays).
    const socket = connect(port, '127.0.0.1');
    const late = readResponse(socket);
    socket.write('GET /healthz HTTP/1.1\r\nhost: keel\r\n');
    await streaming(keel, a, c);

    const started = Date.now();
    const closed = keel.api.close();
    while (keel.api.server.listening) await new Promise((r) => setImmediate(r));
    socket.write('\r\n');

    const refused = { error: { code: 'shutting_down', message: 'the API is shutting down; retry the request' } };
    expect(await late).toEqual({ status: 503, body: refused });
    // The waiting submission answers now, in Keel's shape with the messageId to post again, and close does not wait
    // for the turn: a supervisor's grace period is not spent waiting for it.
    const answer = await waiting;
    const { error } = answer.body;
    expect([answer.status, error?.code, typeof error?.details?.messageId]).toEqual([503, 'shutting_down', 'string']);
    await closed;
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('an open event stream ends when the API closes, and does not hold the close', async () => {
    const keel = await testKeel();
    await keel.api.listen({ host: '127.0.0.1', port: 0 });
    const { port } = keel.api.server.address() as AddressInfo;
    const events = `http://127.0.0.1:${port}/v1/agents/${uniqueId('a')}/conversations/${uniqueId('c')}/events`;
    const stream = await fetch(events);
    expect(stream.status).toBe(200);
    const ended = stream.text().then(
      () => 'ended',
      () => 'ended with an error',
    );

    const started = Date.now();
    await keel.api.close();
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await ended).toBe('ended');
  });

  it('a ?wait=30 submission in flight as the API process stops gets 503 shutting_down; it exits', async () => {
    const keel = await testKeel(); // the worker; the API under test is api/main.ts in a process of its own
    const port = await freePort();
    const api = spawnTs(
      'api/main.ts',
      {
        ...process.env,
        DATABASE_URL: inject('databaseUrl'),
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        KEEL_TASK_QUEUE: keel.taskQueue,
        KEEL_API_PORT: String(port),
        KEEL_LOG_LEVEL: 'warn',
      },
      ['ignore', 'ignore', 'inherit'],
    );
    cleanups.push(() => stopProcess(api, 1_000));
    const base = `http://127.0.0.1:${port}`;
    await eventually(
      () =>
        fetch(`${base}/healthz`).then(
          (r) => r.ok,
          () => false,
        ),
      60_000,
      'the API to listen',
    );

    const [a, c, messageId] = [uniqueId('a'), uniqueId('c'), randomUUID()];
    const answer = post(`${base}${submit(a, c, 30)}`, { messageId, text: '/delay 8000 slow' });
    await streaming(keel, a, c);

    // What `npm start` and most supervisors do: SIGTERM, then SIGKILL after a grace period shorter than the turn.
    type Exit = [number | null, NodeJS.Signals | null];
    const exited = new Promise<Exit>((resolve) => api.once('exit', (code, signal) => resolve([code, signal])));
    await stopProcess(api, 4_000);
    expect(await exited).toEqual([0, null]);
    const res = await answer;
    expect(res.status, JSON.stringify(res.body)).toBe(503);
    expect(res.body.error).toMatchObject({ code: 'shutting_down', details: { messageId } });
    const retry = 'post the message again with the same messageId to get its answer';
    expect(res.body.error?.message).toBe(`the API is shutting down; ${retry}`);

    // As the answer says: the same message posted again (here to the test's own API) answers with its turn.
    const again = await keel.post(a, c, { messageId, text: '/delay 8000 slow' }, { wait: 30 });
    expect([again.status, again.body.status, again.body.reply?.text]).toEqual([200, 'replied', 'echo: slow']);
  });
});

const streaming = (keel: TestKeel, a: string, c: string) =>
  streamingText(keel.pool, conversationWorkflowId(a, c), 30_000);

type Answer = Partial<ErrorBody> & Record<string, unknown>;

/** A POST over a real connection: its status and JSON body, or status 0 and the error when the connection fails. */
async function post(url: string, body: unknown): Promise<{ status: number; body: Answer }> {
  const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
  return fetch(url, init).then(
    async (r) => ({ status: r.status, body: (await r.json()) as Answer }),
    (err: unknown) => {
      const message = String((err as Error).cause ?? err);
      return { status: 0, body: { error: { code: 'connection', message } } };
    },
  );
}

/** One HTTP/1.1 response (with a content-length and a JSON body) read from a raw socket. */
function readResponse(socket: Socket): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffer.subarray(0, end).toString();
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buffer.length < end + 4 + length) return;
      const body = JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString()) as unknown;
      resolve({ status: Number(head.split(' ')[1]), body });
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('the connection closed before a response')));
  });
}
