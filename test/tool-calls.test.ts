import { execFileSync } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { FAKE_SECRET, type ScriptedResponse } from '../domain/scripted-model';
import {
  eventually,
  queueAnswer,
  settledHistory,
  startTestKeel,
  streamingText,
  uniqueId,
  type ApiMethod,
  type TestKeel,
} from './support/keel';
import { startShopHttp, type ShopHttp } from './support/mcp-shop';
import { startWebhookReceiver } from './support/webhook-receiver';

/**
 * A conversation's turn calls a tool server's tools (issue 26): each call an activity the effects ledger knows, a
 * risky one waiting for a person, an unknown outcome never sent twice, a large result kept out of the history. The
 * model is the scripted one: `/tool <server>__<tool> {json}` calls the tool and replies with what it answered.
 */
let keel: TestKeel;
let shop: ShopHttp;
const TOKEN = 'shop-bearer-9c1e7b3d4a605f2a';
beforeAll(async () => {
  keel = await startTestKeel({});
  shop = await startShopHttp({ token: TOKEN });
});
afterAll(async () => {
  await keel?.stop();
  await shop?.close();
});

type ErrorBody = { error: { code: string; message: string } };
interface Approval {
  kind: string;
  id: string;
  modelName: string;
  arguments: Record<string, unknown>;
  origin: { kind: string };
  waitingSince: string;
  expiresAt: string;
  approve: { method: string; path: string };
  reject: { method: string; path: string };
}

const call = <T>(method: ApiMethod, url: string, body?: unknown) => keel.call<T>(method, url, body);

/** An agent with the shop as its tool server (the credentials in a header), and one PUT. */
async function agentWithShop(policies: Record<string, string> = {}): Promise<string> {
  const agent = uniqueId('hands');
  const res = await call('PUT', `/v1/agents/${agent}/tool-servers/shop`, {
    url: shop.url,
    headers: { authorization: `Bearer ${TOKEN}` },
    policies,
  });
  expect(res.status, res.raw).toBe(201);
  return agent;
}

const received = (tool: string) => shop.calls.filter((c) => c.tool === tool);
const approvalsOf = async (agent: string) =>
  (await call<{ items: Approval[] }>('GET', `/v1/agents/${agent}/approvals`)).body.items;
const waitingApproval = (agent: string) =>
  eventually(async () => (await approvalsOf(agent)).find((a) => a.kind === 'tool_call'), 30_000, 'the approval');
/** The ids of every agent's pending approvals, every page of them (an operator's view). */
async function everyAgentsApprovals(): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { body: { items: Approval[]; nextCursor: string | null } } = await call(
      'GET',
      `/v1/approvals?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
    );
    ids.push(...page.body.items.map((a) => a.id));
    cursor = page.body.nextCursor;
  } while (cursor);
  return ids;
}
const transcriptText = async (agent: string, conv: string) =>
  (await call('GET', `/v1/agents/${agent}/conversations/${conv}?limit=200`)).raw;

/** The reply the turn of this message ended with, once it ended. */
async function replyOf(agent: string, conv: string, turnId: string): Promise<string> {
  return eventually(
    async () => {
      const { rows } = await keel.pool.query<{ status: string; text: string | null }>(
        `SELECT t.status, m.text FROM turns t LEFT JOIN messages m ON m.conversation_key = t.conversation_key
            AND m.seq = t.reply_seq
          WHERE t.turn_id = $1`,
        [turnId],
      );
      const r = rows[0];
      return r && !['queued', 'running'].includes(r.status) ? `${r.status}: ${r.text ?? ''}` : undefined;
    },
    60_000,
    `the end of turn ${turnId}`,
  );
}

describe('a read-only tool runs at once', () => {
  it('reaches the server once, with its idempotency key in _meta, and the model reads its answer', async () => {
    const agent = await agentWithShop();
    const conv = uniqueId('c');
    const res = await keel.post(
      agent,
      conv,
      { messageId: uniqueId('m'), text: '/tool shop__lookup_order {"orderId":"A1"}' },
      {
        wait: 30,
      },
    );
    expect(res.body.reply?.text).toBe('tool result: order A1: shipped');
    const sent = shop.calls.filter((c) => c.args.orderId === 'A1');
    expect(sent).toHaveLength(1);
    const toolUse = 'toolu_scripted_1_shop__lookup_order';
    const key = `${conversationWorkflowId(agent, conv)}/turn/${res.body.turnId}/call/1/tool/${toolUse}`;
    expect(sent[0]!.idempotencyKey).toBe(key);

    // The model step that asked for it ran it: in the Temporal UI, that step's result (its marker) holds the call
    // and its answer, and no step of its own follows for it.
    const steps = await stepsOf(conversationWorkflowId(agent, conv));
    // The same step then made the turn's next model call, which sent the reply and committed the turn's end: the
    // whole turn is one step, with no hand-over to the workflow inside it (after the run's own start-up step).
    expect(steps.map((s) => s.type)).toEqual(['resumeConversation', 'callTurnModel']);
    expect(JSON.parse(steps[1]!.result)).toMatchObject({
      toolAttempts: {
        [toolUse]: { kind: 'ran', how: 'auto', result: { content: 'order A1: shipped', isError: false } },
      },
      next: { replied: { outcome: 'skipped:channel_none' } },
    });
    // The effects ledger knows it, under the same key.
    const { rows } = await keel.pool.query(`SELECT kind, status FROM effects WHERE key = $1`, [key]);
    expect(rows).toEqual([{ kind: 'tool_call', status: 'done' }]);
    // And /metrics counts it, with how long it took.
    const metrics = (await keel.api.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/^keel_tool_calls_total\{server="shop",tool="lookup_order",outcome="ok"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^keel_tool_call_duration_seconds_count\{server="shop",tool="lookup_order"\} [1-9]\d*$/m);
    expect(metrics).toMatch(
      /^keel_tool_call_duration_seconds_bucket\{server="shop",tool="lookup_order",le="\+Inf"\} [1-9]/m,
    );
  });

  it("a tool's own error goes back to the model as a tool error", async () => {
    const agent = await agentWithShop();
    const res = await keel.post(
      agent,
      uniqueId('c'),
      { messageId: uniqueId('m'), text: '/tool shop__out_of_stock {}' },
      {
        wait: 30,
      },
    );
    expect(res.body.reply?.text).toBe('tool error: the item is out of stock');
  });

  it('a secret in a result is redacted before the model sees it, and the transcript says so', async () => {
    const agent = await agentWithShop();
    const conv = uniqueId('c');
    const res = await keel.post(
      agent,
      conv,
      { messageId: uniqueId('m'), text: '/tool shop__leaky_lookup {}' },
      { wait: 30 },
    );
    expect(res.body.reply?.text).toContain('tool result: the config says api key [redacted: ');
    expect(res.body.reply?.text).toContain('[Keel redacted what looked like secrets from this result: ');
    expect(await transcriptText(agent, conv)).not.toContain(FAKE_SECRET);
  });

  it('a 300 KB result adds less than 20 KB to the history; the model reads it up to its budget', async () => {
    const agent = await agentWithShop();
    const small = uniqueId('c');
    const big = uniqueId('c');
    await keel.post(
      agent,
      small,
      { messageId: uniqueId('m'), text: '/tool shop__lookup_order {"orderId":"S"}' },
      { wait: 30 },
    );
    const res = await keel.post(
      agent,
      big,
      { messageId: uniqueId('m'), text: '/tool shop__big_report {}' },
      { wait: 30 },
    );
    // The model read 100,000 characters of it, and the notice of the cut.
    expect(res.body.reply?.text).toMatch(/^tool result: line 0: x+\nline 1: /);
    expect(res.body.reply?.text).toMatch(/… \(100\d{3} characters\)$/);
    const bytes = async (conv: string) => {
      const h = await keel.client.workflow.getHandle(conversationWorkflowId(agent, conv)).fetchHistory();
      return temporal.api.history.v1.History.encode(h).finish().length;
    };
    const grown = (await bytes(big)) - (await bytes(small));
    expect(grown).toBeLessThan(20 * 1024);
  });
});

/** The local steps a conversation's workflow took, as the Temporal UI shows them: each one's type and result. */
async function stepsOf(workflowId: string): Promise<{ type: string; result: string }[]> {
  const history = await settledHistory(keel, workflowId);
  return (history.events ?? []).flatMap((e) => {
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_local_activity') return [];
    const [result] = marker.details?.result?.payloads ?? [];
    const step = JSON.parse(Buffer.from(marker.details!.data!.payloads![0]!.data!).toString()) as {
      activity_type: string;
    };
    return [{ type: step.activity_type, result: result?.data ? Buffer.from(result.data).toString() : '' }];
  });
}

/** The tool results a turn's transcript holds, by the model call that asked for them. */
async function toolResultRows(turnId: string): Promise<{ origin: string; text: string }[]> {
  const { rows } = await keel.pool.query<{ origin: string; text: string }>(
    `SELECT origin, text FROM messages WHERE turn_id = $1 AND role = 'tool' ORDER BY seq`,
    [turnId],
  );
  return rows;
}

const USAGE = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 };
const lookup = (orderId: string, callIndex: number): ScriptedResponse => ({
  content: [{ type: 'tool_use', id: `toolu_${orderId}_${callIndex}`, name: 'shop__lookup_order', input: { orderId } }],
  stopReason: 'tool_use',
  usage: USAGE,
});

describe("a model step goes on with the turn's next model call once all its tool calls ran", () => {
  it('an interrupt during that next call ends the turn; the tool ran once, its result written once', async () => {
    const agent = await agentWithShop();
    const conv = uniqueId('c');
    const key = conversationWorkflowId(agent, conv);
    await queueAnswer(keel, agent, conv, lookup('I1', 1));
    // The next call streams slowly: the interrupt comes while it is out.
    await queueAnswer(keel, agent, conv, {
      content: [{ type: 'text', text: 'one two three four five six seven eight nine ten' }],
      stopReason: 'end_turn',
      usage: USAGE,
      delayMs: 6000,
    });
    const first = await keel.post(agent, conv, { messageId: uniqueId('m'), text: 'look up I1' });
    await streamingText(keel.pool, key, 15_000);
    const stop = await keel.post(
      agent,
      conv,
      { messageId: uniqueId('m'), text: 'stop', mode: 'interrupt' },
      { wait: 30 },
    );
    expect(stop.body.reply?.text).toBe('echo: stop');
    expect(await replyOf(agent, conv, first.body.turnId)).toBe('interrupted: ');
    expect(shop.calls.filter((c) => c.args.orderId === 'I1')).toHaveLength(1);
    expect(await toolResultRows(first.body.turnId)).toEqual([
      { origin: `turn:${first.body.turnId}:results:1`, text: 'order I1: shipped' },
    ]);
    const { rows } = await keel.pool.query<{ text: string }>(
      `SELECT text FROM messages WHERE conversation_key = $1 AND turn_id = $2 AND role = 'assistant' ORDER BY seq`,
      [key, first.body.turnId],
    );
    expect(rows.at(-1)?.text).toMatch(/^one.*\[interrupted\]$/);
  });

  it('a message steered in while its tool runs is read by the next model call, in the same turn', async () => {
    const agent = await agentWithShop();
    const conv = uniqueId('c');
    // The tool takes 4 s: a message reaches a turn whose step is out when its workflow task is extended (every 2.4 s).
    const first = await keel.post(agent, conv, {
      messageId: uniqueId('m'),
      text: '/tool shop__slow_lookup {"orderId":"S1","ms":4000}',
    });
    await eventually(async () => received('slow_lookup').some((c) => c.args.orderId === 'S1'), 15_000, 'the call');
    const steer = await keel.post(
      agent,
      conv,
      { messageId: uniqueId('m'), text: 'actually, this', mode: 'steer' },
      { wait: 30 },
    );
    expect(steer.body.turnId).toBe(first.body.turnId);
    expect(steer.body.reply?.text).toBe('echo: actually, this');
    const { rows } = await keel.pool.query(`SELECT turn_id FROM turns WHERE conversation_key = $1`, [
      conversationWorkflowId(agent, conv),
    ]);
    expect(rows).toEqual([{ turn_id: first.body.turnId }]);
  });

  it("a model that keeps calling tools runs them all in one step, up to the turn's 5 model calls", async () => {
    const agent = await agentWithShop();
    const conv = uniqueId('c');
    for (let i = 1; i <= 6; i++) await queueAnswer(keel, agent, conv, lookup(`L${i}`, i));
    const res = await keel.post(agent, conv, { messageId: uniqueId('m'), text: 'look them all up' });
    expect(await replyOf(agent, conv, res.body.turnId)).toBe('error: ');
    const { rows } = await keel.pool.query<{ error: { code: string }; model_calls: number }>(
      `SELECT error, model_calls FROM turns WHERE turn_id = $1`,
      [res.body.turnId],
    );
    expect(rows[0]).toMatchObject({ error: { code: 'max_model_calls' }, model_calls: 5 });
    // Five calls of the tool, once each; the sixth answer was never asked for.
    const sent = shop.calls.filter((c) => /^L\d$/.test(String(c.args.orderId))).map((c) => c.args.orderId);
    expect(sent).toEqual(['L1', 'L2', 'L3', 'L4', 'L5']);
    expect((await toolResultRows(res.body.turnId)).map((r) => r.origin)).toEqual(
      [1, 2, 3, 4, 5].map((i) => `turn:${res.body.turnId}:results:${i}`),
    );
    // One step for all five calls; the turn's end, with the last call's results, is a step of its own. The run's
    // start-up comes before them.
    const steps = await stepsOf(conversationWorkflowId(agent, conv));
    expect(steps.map((s) => s.type)).toEqual(['resumeConversation', 'callTurnModel', 'finishTurn']);
  });
});

describe('a risky tool waits for a person', () => {
  it('waits in the inbox with its arguments and runs once when approved; a second decision is refused', async () => {
    const agent = await agentWithShop();
    const conv = uniqueId('c');
    const posted = await keel.post(agent, conv, {
      messageId: uniqueId('m'),
      text: '/tool shop__refund {"orderId":"R1","amount":5}',
    });
    expect(posted.status).toBe(202);
    const approval = await waitingApproval(agent);
    expect(approval).toMatchObject({
      modelName: 'shop__refund',
      arguments: { orderId: 'R1', amount: 5 },
      origin: { kind: 'conversation' },
      approve: { method: 'POST', path: `/v1/agents/${agent}/tool-calls/${approval.id}/approve` },
    });
    expect(Date.parse(approval.expiresAt) - Date.parse(approval.waitingSince)).toBe(24 * 3_600_000);
    expect(await everyAgentsApprovals()).toContain(approval.id);
    expect(received('refund').filter((c) => c.args.orderId === 'R1')).toHaveLength(0);

    const approved = await call<{ status: string }>('POST', approval.approve.path, {});
    expect(approved.status).toBe(200);
    // The answer shows the call as it is once the decision is taken: approved, or already running or answered when the
    // workflow was quicker than the API's own record of the decision.
    expect(['approved', 'running', 'ok']).toContain(approved.body.status);
    expect(await replyOf(agent, conv, posted.body.turnId)).toBe('replied: tool result: refunded 5 on order R1');
    const again = await call<ErrorBody>('POST', approval.approve.path, {});
    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain('is ok, not waiting for approval');
    expect(received('refund').filter((c) => c.args.orderId === 'R1')).toHaveLength(1);
    expect(await approvalsOf(agent)).toEqual([]);
  });

  it("the agent's owner hears once that a call waits, with the tool and its arguments", async () => {
    const owner = await startWebhookReceiver();
    try {
      const agent = await agentWithShop();
      const set = await call('PUT', `/v1/agents/${agent}`, {
        name: agent,
        owner: { delivery: { channel: 'webhook', url: owner.url } },
      });
      expect(set.status, set.raw).toBe(200);
      await keel.post(agent, uniqueId('c'), { text: '/tool shop__refund {"orderId":"N1","amount":2}' });
      const approval = await waitingApproval(agent);
      await owner.waitFor((r) => r.length > 0, 30_000);
      const text = (owner.received[0]!.body as { text: string }).text;
      expect(text).toContain(
        `Agent ${agent} waits for your approval to call shop__refund with {"amount":2,"orderId":"N1"}`,
      );
      expect(text).toContain(`tool call ${approval.id}`);
      // Decided, the turn ends: no second notice could come after that.
      expect((await call('POST', approval.reject.path, {})).status).toBe(200);
      await eventually(async () => (await approvalsOf(agent)).length === 0, 30_000, 'the wait to end');
      expect(owner.received).toHaveLength(1);
    } finally {
      await owner.close();
    }
  });

  it('a rejection reaches the model with its note, and the tool never runs', async () => {
    const agent = await agentWithShop();
    const conv = uniqueId('c');
    const posted = await keel.post(agent, conv, {
      messageId: uniqueId('m'),
      text: '/tool shop__refund {"orderId":"R2","amount":7}',
    });
    const approval = await waitingApproval(agent);
    expect((await call('POST', approval.reject.path, { note: 'not this one' })).status).toBe(200);
    expect(await replyOf(agent, conv, posted.body.turnId)).toBe(
      'replied: tool error: tool shop__refund was rejected by a person, so it did not run: not this one',
    );
    expect(received('refund').filter((c) => c.args.orderId === 'R2')).toHaveLength(0);
  });

  it('a steer message cancels the wait; the model reads why, then the message', async () => {
    const agent = await agentWithShop();
    const conv = uniqueId('c');
    const posted = await keel.post(agent, conv, {
      messageId: uniqueId('m'),
      text: '/tool shop__refund {"orderId":"R3","amount":9}',
    });
    const approval = await waitingApproval(agent);
    await keel.post(agent, conv, { messageId: uniqueId('m'), text: 'never mind', mode: 'steer' });
    expect(await replyOf(agent, conv, posted.body.turnId)).toBe('replied: echo: never mind');
    expect(await transcriptText(agent, conv)).toContain(
      'tool shop__refund did not run: a new message arrived while it waited for approval',
    );
    const decided = await call<ErrorBody>('POST', approval.approve.path, {});
    expect(decided.status).toBe(409);
    expect(received('refund').filter((c) => c.args.orderId === 'R3')).toHaveLength(0);
  });

  it('an expired wait is a rejection that says it expired', async () => {
    const short = await startTestKeel({ toolApprovalWaitMs: 1_500 });
    try {
      const agent = uniqueId('hands');
      const put = await short.api.inject({
        method: 'PUT',
        url: `/v1/agents/${agent}/tool-servers/shop`,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ url: shop.url, headers: { authorization: `Bearer ${TOKEN}` } }),
      });
      expect(put.statusCode).toBe(201);
      const res = await short.post(
        agent,
        uniqueId('c'),
        { messageId: uniqueId('m'), text: '/tool shop__refund {"orderId":"R4","amount":1}' },
        {
          wait: 30,
        },
      );
      expect(res.body.reply?.text).toBe(
        'tool error: tool shop__refund was not approved within 0 min, so it expired and did not run',
      );
      expect(received('refund').filter((c) => c.args.orderId === 'R4')).toHaveLength(0);
      const { rows } = await short.pool.query(`SELECT status FROM tool_calls WHERE agent_id = $1`, [agent]);
      expect(rows).toEqual([{ status: 'expired' }]);
    } finally {
      await short.stop();
    }
  });
});

describe('an outcome that is unknown is never sent again', () => {
  it('the server drops the connection after it received a non-idempotent call: told, listed, sent once', async () => {
    const agent = await agentWithShop({ charge: 'auto' });
    const conv = uniqueId('c');
    const res = await keel.post(
      agent,
      conv,
      { messageId: uniqueId('m'), text: '/tool shop__charge {"orderId":"C1"}' },
      { wait: 60 },
    );
    expect(res.body.reply?.text).toMatch(/^tool error: outcome unknown: .*it was not sent again$/);
    const unknown = await call<{ items: { id: string; modelName: string; status: string; failure: string }[] }>(
      'GET',
      `/v1/agents/${agent}/tool-calls?status=unknown`,
    );
    expect(unknown.body.items).toHaveLength(1);
    expect(unknown.body.items[0]).toMatchObject({ modelName: 'shop__charge', status: 'unknown' });
    // Only now could a second send have happened: the turn is over.
    expect(received('charge').filter((c) => c.args.orderId === 'C1')).toHaveLength(1);
  });
});

describe('a read-only call that loses its answer is sent again', () => {
  it('with backoff and the same idempotency key, until it is answered', async () => {
    const agent = await agentWithShop();
    const res = await keel.post(
      agent,
      uniqueId('c'),
      { text: '/tool shop__flaky_lookup {"orderId":"F1"}' },
      { wait: 60 },
    );
    expect(res.body.reply?.text).toMatch(/^tool result: order F1: found on try \d+$/);
    const sent = received('flaky_lookup').filter((c) => c.args.orderId === 'F1');
    expect(sent).toHaveLength(2);
    expect(sent[1]!.idempotencyKey).toBe(sent[0]!.idempotencyKey);
  });
});

describe('secrets stay secret', () => {
  it('the header value is in no API answer and nowhere in the exported history', async () => {
    const agent = await agentWithShop();
    const conv = uniqueId('c');
    await keel.post(
      agent,
      conv,
      { messageId: uniqueId('m'), text: '/tool shop__lookup_order {"orderId":"Z9"}' },
      { wait: 30 },
    );
    expect(shop.authorizations).toContain(`Bearer ${TOKEN}`);
    const history = await settledHistory(keel, conversationWorkflowId(agent, conv));
    // The history as `temporal workflow show --output json` exports it, every payload decoded to the text it holds.
    const exported = JSON.stringify(history).replace(/"data":"([A-Za-z0-9+/=]*)"/g, (_m, b64: string) =>
      JSON.stringify(Buffer.from(b64, 'base64').toString('utf8')),
    );
    expect(exported).toContain('shop__lookup_order');
    expect(exported).not.toContain(TOKEN);
    for (const url of [
      `/v1/agents/${agent}/tool-servers`,
      `/v1/agents/${agent}/tool-calls`,
      `/v1/agents/${agent}/conversations/${conv}`,
    ])
      expect((await call('GET', url)).raw).not.toContain(TOKEN);
  });
});

describe('the tool list follows the server', () => {
  it("the server's tools/list_changed notification refreshes the stored list; a later turn is offered it", async () => {
    const agent = await agentWithShop();
    // One call opens the worker's live session with the server: the session the notification comes on.
    await keel.post(agent, uniqueId('c'), { text: '/tool shop__lookup_order {"orderId":"L1"}' }, { wait: 30 });
    const name = `gift_card_${uniqueId('t').slice(2)}`.replace(/-/g, '_');
    shop.addTool(name);
    await eventually(
      async () =>
        (await call<{ tools: { name: string }[] }>('GET', `/v1/agents/${agent}/tool-servers/shop`)).body.tools.some(
          (t) => t.name === name,
        ),
      30_000,
      'the new tool in the stored list',
    );
    const res = await keel.post(agent, uniqueId('c'), { text: `/tool shop__${name} {}` }, { wait: 30 });
    expect(res.body.reply?.text).toBe(`tool result: ${name}`);
  });
});

describe('a stdio server whose process dies', () => {
  it('is started again for the next call: the worker re-initialises a lost session', async () => {
    const agent = uniqueId('hands');
    const dir = await mkdtemp(path.join(os.tmpdir(), 'keel-fs-'));
    await writeFile(path.join(dir, 'note.txt'), 'first');
    const put = await call('PUT', `/v1/agents/${agent}/tool-servers/fs`, {
      command: 'npx',
      args: ['--no-install', '@modelcontextprotocol/server-filesystem', dir],
    });
    expect(put.status, put.raw).toBe(201);
    const read = (c: string) =>
      keel.post(agent, c, { text: `/tool fs__read_text_file {"path":"${path.join(dir, 'note.txt')}"}` }, { wait: 60 });
    expect((await read(uniqueId('c'))).body.reply?.text).toBe('tool result: first');
    // The worker's live session runs the server as a process whose command line names the folder: kill it.
    const pids = execFileSync('pgrep', ['-f', `server-filesystem ${dir}`])
      .toString()
      .trim()
      .split('\n');
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) process.kill(Number(pid), 'SIGKILL');
    await writeFile(path.join(dir, 'note.txt'), 'second');
    expect((await read(uniqueId('c'))).body.reply?.text).toBe('tool result: second');
  });
});
