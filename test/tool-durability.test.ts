import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import { Writable } from 'node:stream';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { stopProcess } from '../scripts/processes';
import { eventually, startTestKeel, uniqueId, type ApiMethod, type TestKeel } from './support/keel';
import { startShopHttp, type ShopHttp } from './support/mcp-shop';
import { quiescent } from './support/quiescence';
import { startWorkerProcess } from './support/workers';

/**
 * Tool calls under a kill -9 of the worker (issue 26): a call that waits for a person holds no activity, so the
 * worker's death changes nothing and the approval runs it once; a delegate that writes a file through the filesystem
 * MCP server from npm writes it once, and its outcome is committed and relayed once.
 */
let keel: TestKeel;
let shop: ShopHttp;
const children: ChildProcess[] = [];
const TOKEN = 'durable-shop-token-4e8a1c0b9d';
/** Everything the API and the worker processes logged, at debug level: where a secret must never appear. */
let logged = '';
const apiLog = new Writable({
  write(chunk: Buffer, _enc, done) {
    logged += chunk.toString();
    done();
  },
});
beforeAll(async () => {
  keel = await startTestKeel({ worker: false, apiLog });
  shop = await startShopHttp({ token: TOKEN });
});
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => stopProcess(c)));
});
afterAll(async () => {
  await keel?.stop();
  await shop?.close();
});

function worker(): ChildProcess {
  const child = startWorkerProcess(keel, inject('databaseUrl'), { KEEL_LOG_LEVEL: 'debug' }, [
    'ignore',
    'pipe',
    'pipe',
  ]);
  for (const out of [child.stdout, child.stderr]) out?.on('data', (d: Buffer) => (logged += d.toString()));
  children.push(child);
  return child;
}

const call = <T>(method: ApiMethod, url: string, body?: unknown) => keel.call<T>(method, url, body);

describe('a kill -9 of the worker while a tool call waits for a person', () => {
  it('changes nothing: the approval runs the call once and the turn replies; no log holds the secret', async () => {
    const agent = uniqueId('hands');
    const put = await call('PUT', `/v1/agents/${agent}/tool-servers/shop`, {
      url: shop.url,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(put.status).toBe(201);
    const first = worker();
    const conv = uniqueId('c');
    const posted = await keel.post(agent, conv, {
      messageId: uniqueId('m'),
      text: '/tool shop__refund {"orderId":"K1","amount":3}',
    });
    const approval = await eventually(
      async () =>
        (await call<{ items: { id: string; approve: { path: string } }[] }>('GET', `/v1/agents/${agent}/approvals`))
          .body.items[0],
      60_000,
      'the approval',
    );
    // The wait holds no activity: nothing is pending while it waits.
    const { raw } = await keel.client.workflow.getHandle(conversationWorkflowId(agent, conv)).describe();
    expect(raw.pendingActivities ?? []).toEqual([]);

    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));
    worker();
    const approved = await call<{ status: string }>('POST', approval.approve.path, {});
    expect(approved.status, approved.raw).toBe(200);
    const reply = await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ status: string; text: string | null }>(
          `SELECT t.status, m.text FROM turns t LEFT JOIN messages m
              ON m.conversation_key = t.conversation_key AND m.seq = t.reply_seq WHERE t.turn_id = $1`,
          [posted.body.turnId],
        );
        return rows[0]?.status === 'replied' ? rows[0].text : undefined;
      },
      90_000,
      'the reply',
    );
    expect(reply).toBe('tool result: refunded 3 on order K1');
    expect(shop.calls.filter((c) => c.args.orderId === 'K1')).toHaveLength(1);
    expect(shop.authorizations).toContain(`Bearer ${TOKEN}`);
    // The API logged its requests (the PUT among them) and the workers theirs: the header value is in none of it.
    expect(logged).toContain('tool-servers/shop');
    expect(logged).not.toContain(TOKEN);
  });
});

describe('a delegate with the filesystem server from npm', () => {
  it('writes the file once under a kill -9 mid-delegate; its outcome is committed and relayed once', async () => {
    const agent = uniqueId('hands');
    // Not under the tests' data folder: the server is given exactly this folder and nothing else.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'keel-fs-'));
    const fs = await call<{ tools: { name: string; policy: string }[] }>('PUT', `/v1/agents/${agent}/tool-servers/fs`, {
      command: 'npx',
      args: ['--no-install', '@modelcontextprotocol/server-filesystem', dir],
      policies: { write_file: 'auto' },
    });
    expect(fs.status, fs.raw).toBe(201);
    // A second server the task does not allow: its delegate is not offered it.
    const shopPut = await call('PUT', `/v1/agents/${agent}/tool-servers/shop`, {
      url: shop.url,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(shopPut.status).toBe(201);
    const file = path.join(dir, 'report.txt');
    const task = await call<{ number: number }>('POST', `/v1/agents/${agent}/tasks`, {
      title: 'write the report',
      description: `/tool fs__write_file ${JSON.stringify({ path: file, content: 'the report, written once' })}`,
      status: 'ready',
      toolServers: ['fs'],
    });
    expect(task.status, task.raw).toBe(201);

    const first = worker();
    const conv = uniqueId('c');
    await keel.post(agent, conv, {
      messageId: uniqueId('m'),
      text: `/tool spawn_delegate {"task":${task.body.number}}`,
    });
    // Killed once the delegate has asked for the write: mid-delegate, with its outcome not yet committed.
    await eventually(
      async () => (await keel.pool.query(`SELECT 1 FROM tool_calls WHERE agent_id = $1`, [agent])).rowCount === 1,
      60_000,
      'the write to be asked for',
    );
    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));
    worker();

    const relays = async () =>
      (
        await keel.pool.query<{ text: string }>(
          `SELECT text FROM messages WHERE conversation_key = $1 AND role = 'assistant' AND text LIKE 'relay: %'`,
          [conversationWorkflowId(agent, conv)],
        )
      ).rows.map((r) => r.text);
    await eventually(async () => (await relays()).length > 0, 120_000, 'the relay');
    expect(await readFile(file, 'utf8')).toBe('the report, written once');
    const { rows: calls } = await keel.pool.query<{ tool: string; status: string; origin: string }>(
      `SELECT tool, status, origin FROM tool_calls WHERE agent_id = $1`,
      [agent],
    );
    expect(calls).toEqual([{ tool: 'write_file', status: 'ok', origin: 'delegate' }]);
    const { rows: delegates } = await keel.pool.query<{ outcome_kind: string; result: string }>(
      `SELECT outcome_kind, result FROM delegates WHERE agent_id = $1`,
      [agent],
    );
    expect(delegates).toHaveLength(1);
    expect(delegates[0]!.outcome_kind).toBe('success');
    expect(delegates[0]!.result).toMatch(/^tool result: Successfully wrote to /);
    // The delegate was offered the filesystem server's tools and not the shop's.
    const { rows: pinned } = await keel.pool.query<{ names: string[] }>(
      `SELECT array(SELECT jsonb_array_elements(l.tools)->>'modelName') AS names
         FROM turn_tool_lists p JOIN tool_lists l USING (hash) JOIN delegates d ON d.delegate_id = p.turn_id
        WHERE d.agent_id = $1`,
      [agent],
    );
    expect(pinned[0]!.names).toContain('fs__write_file');
    expect(pinned[0]!.names.some((n) => n.startsWith('shop__'))).toBe(false);
    // Only now could a second relay have come: the conversation is at rest again.
    const key = conversationWorkflowId(agent, conv);
    await eventually(() => quiescent(keel.client, key), 60_000, 'the conversation at rest');
    expect(await relays()).toHaveLength(1);
  });
});
