import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { payloadEncryption } from '../services/payload-encryption';
import { fetchHistory, historyJson } from '../services/run-history';
import { startDevServer, type DevServer } from '../scripts/dev-server';
import { freePort } from '../scripts/ports';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';

const run = promisify(execFile);
const key = (id: string, fill: number) => `${id}:${Buffer.alloc(32, fill).toString('base64')}`;
const KEY_A = key('a', 1);
const KEY_B = key('b', 2);
const OPERATOR = 'operator-token-for-the-codec';
const AGENT_TOKEN = 'agent-token-for-the-codec';

let dir: string;
let temporal: DevServer;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'keel-sealed-'));
  // A server of this file's own, on a SQLite file: what it keeps on disk is read below.
  temporal = await startDevServer({ port: await freePort(), dbFile: path.join(dir, 'temporal.db'), stdio: 'ignore' });
});
afterAll(async () => {
  await temporal?.stop();
  await rm(dir, { recursive: true, force: true });
});

const sealedKeel = (keys: string, o: { taskQueue?: string; conversationIdleMs?: number } = {}) =>
  startTestKeel({
    temporalAddress: temporal.address,
    payloadKeys: keys,
    tokens: new Map([
      [OPERATOR, '*'],
      [AGENT_TOKEN, 'someone'],
    ]),
    ...o,
  });

/** `temporal workflow show` as an operator runs it, with the codec server or without. */
async function show(workflowId: string, codec?: { endpoint: string; auth: string }): Promise<string> {
  const args = ['workflow', 'show', '--address', temporal.address, '-w', workflowId, '-o', 'json'];
  if (codec) args.push('--codec-endpoint', codec.endpoint, '--codec-auth', codec.auth);
  const { stdout } = await run(temporal.cli.path, args, { maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** The export with every payload's bytes as text too: what a reader of it would find. */
const readable = (exported: string) =>
  exported.replace(/"data":\s*"([A-Za-z0-9+/=]*)"/g, (_m, b64: string) => Buffer.from(b64, 'base64').toString('utf8'));
const b64 = (s: string) => Buffer.from(s).toString('base64');
/** A metadata entry of a payload in proto JSON: its value in base64. */
const metadataEntry = (k: string, v: string) => new RegExp(`"${k}":\\s*"${b64(v)}"`);

describe('payload encryption', () => {
  let keel: TestKeel;
  let api: string;
  beforeAll(async () => {
    keel = await sealedKeel(KEY_A);
    api = await keel.api.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(() => keel?.stop());
  const as = (token: string) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' });

  it("a turn's content is ciphertext in Temporal's export and database, clear through the codec", async () => {
    const [agent, conv] = [uniqueId('a'), uniqueId('c')];
    const marker = `marker-${uniqueId('m')}`;
    // The model's answer (the scripted model echoes the message) travels in the turn's payloads.
    const res = await keel.post(agent, conv, { text: `remember ${marker}` }, { wait: 30, token: OPERATOR });
    expect(res.status).toBe(200);
    const workflowId = conversationWorkflowId(agent, conv);

    const sealed = await show(workflowId);
    expect(sealed).toMatch(metadataEntry('encoding', 'binary/encrypted'));
    expect(readable(sealed)).not.toContain(marker);
    for (const file of ['temporal.db', 'temporal.db-wal']) {
      const bytes = await readFile(path.join(dir, file)).catch(() => Buffer.alloc(0));
      expect(bytes.includes(marker), file).toBe(false);
    }

    const clear = await show(workflowId, { endpoint: `${api}/codec`, auth: `Bearer ${OPERATOR}` });
    expect(clear).not.toMatch(metadataEntry('encoding', 'binary/encrypted'));
    expect(readable(clear)).toContain(marker);
    // Keel's own readers decode with its keys: the console's history view and the replayer get the clear history.
    const viewed = await fetch(`${api}/v1/runs/${encodeURIComponent(workflowId)}/history`, {
      headers: as(OPERATOR),
    });
    expect(readable(await viewed.text())).toContain(marker);
  });

  it('the codec server answers operators only, and a browser only from the Temporal UI', async () => {
    const body = JSON.stringify({ payloads: [] });
    const post = (headers: Record<string, string>) =>
      fetch(`${api}/codec/decode`, { method: 'POST', headers, body }).then((r) => r.status);
    expect(await post({ 'content-type': 'application/json' })).toBe(401);
    expect(await post(as(AGENT_TOKEN))).toBe(403);
    expect(await post(as(OPERATOR))).toBe(200);
    // A payload sealed with a key this API does not hold is the caller's to fix: 400, naming the key.
    const foreign = {
      metadata: { encoding: b64('binary/encrypted'), 'encryption-key-id': b64('zz') },
      data: b64('x'.repeat(40)),
    };
    const refused = await fetch(`${api}/codec/decode`, {
      method: 'POST',
      headers: as(OPERATOR),
      body: JSON.stringify({ payloads: [foreign] }),
    });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: {
        code: 'invalid_payload',
        message: 'cannot decode: a payload is sealed with key "zz", which KEEL_PAYLOAD_KEYS does not hold',
      },
    });
    // The Web UI sends no bearer token: the operator's session cookie stands for it.
    const session = await fetch(`${api}/codec/session`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPERATOR}` },
    });
    expect(session.status).toBe(200);
    expect(await session.json()).toEqual({ cookie: 'set' });
    const cookie = session.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^keel_codec=.*HttpOnly/i);
    const viaCookie = await fetch(`${api}/codec/decode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: cookie.split(';')[0]! },
      body,
    });
    expect(viaCookie.status).toBe(200);
    // No UI origin is configured here: a browser's preflight from anywhere is refused its CORS headers.
    const preflight = await fetch(`${api}/codec/decode`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('a history sealed under an old key still finishes and decodes after a new key is added in front', async () => {
    const [agent, conv] = [uniqueId('a'), uniqueId('c')];
    const workflowId = conversationWorkflowId(agent, conv);
    // Its own Keel under a, whose conversations close 8 s after their last turn.
    const idle = { conversationIdleMs: 8_000 };
    const underA = await sealedKeel(KEY_A, idle);
    const rotated = await (async () => {
      try {
        const first = await underA.post(agent, conv, { text: 'under key a' }, { wait: 30, token: OPERATOR });
        expect(first.body.status).toBe('replied');
      } finally {
        await underA.stop();
      }
      // The same run goes on under a worker whose ring seals with b and still holds a.
      return sealedKeel(`${KEY_B},${KEY_A}`, { ...idle, taskQueue: underA.taskQueue });
    })();
    try {
      const runId = (await rotated.client.workflow.getHandle(workflowId).describe()).runId;
      const second = await rotated.post(agent, conv, { text: 'under key b' }, { wait: 30, token: OPERATOR });
      expect(second.body.status).toBe('replied');
      await rotated.client.workflow.getHandle(workflowId, runId).result();
      const sealed = await show(workflowId);
      expect(sealed).toMatch(metadataEntry('encryption-key-id', 'a'));
      expect(sealed).toMatch(metadataEntry('encryption-key-id', 'b'));
      const { history } = await fetchHistory(rotated.client, workflowId, runId);
      const clear = historyJson.stringify(history);
      expect(readable(clear)).toContain('echo: under key a');
      expect(readable(clear)).toContain('echo: under key b');
      expect(clear).not.toMatch(metadataEntry('encoding', 'binary/encrypted'));
      // With b alone, what a sealed cannot be read, and the error names the key it needs.
      const connection = await Connection.connect({ address: temporal.address });
      const bOnly = new Client({
        connection,
        dataConverter: payloadEncryption({ keys: KEY_B, production: false }, 'test').dataConverter,
      });
      await expect(fetchHistory(bOnly, workflowId, runId)).rejects.toThrow(/key "a"/);
      await connection.close();
    } finally {
      await rotated.stop();
    }
  });
});

describe('production without payload keys', () => {
  it('refuses to start, saying how to run without encryption on purpose', () => {
    expect(() => payloadEncryption({ production: true }, 'worker')).toThrow(
      /refusing to start the worker without KEEL_PAYLOAD_KEYS.*KEEL_PAYLOAD_ENCRYPTION=off/,
    );
    expect(payloadEncryption({ production: true, encryption: 'off' }, 'worker').codecs).toEqual([]);
    expect(payloadEncryption({ production: false }, 'worker').describe).toMatch(/development only/);
    expect(payloadEncryption({ keys: KEY_A, production: true }, 'worker').describe).toBe('AES-256-GCM, key a');
  });
});
