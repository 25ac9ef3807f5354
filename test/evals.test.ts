import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId, jobScheduleId } from '../domain/ids';
import type { ModelMessage, ModelProvider, ModelRequest } from '../domain/model';
import { scriptedProvider } from '../worker/wiring';
import { connectShop, evaluate as evaluateAs } from './support/evals';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startShopHttp, type ShopHttp } from './support/mcp-shop';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

/**
 * Evaluations from recorded conversations (issue 30): a real conversation of 20 turns with tool calls, recorded by a
 * real Keel against a real MCP server, replayed with zero model calls against its own configuration and against
 * candidates; and a fork of it at turn 5. Nothing an evaluation does reaches the webhook receiver or the tool server.
 */
let keel: TestKeel;
let shop: ShopHttp;
let receiver: WebhookReceiver;
/** Every request the worker's model received, with the conversation and call it was for. */
const asked: { conversationKey: string; callIndex: number; request: ModelRequest }[] = [];
const TOKEN = 'shop-bearer-evals-5e2a';
const agent = uniqueId('evals');
const conversation = uniqueId('recorded');
const TURNS = 20;

/** The scripted model, with each request it answers kept. */
function askedModel(real: ModelProvider): ModelProvider {
  return {
    name: real.name,
    call(request, ctx) {
      asked.push({ conversationKey: ctx.conversationKey, callIndex: ctx.callIndex, request });
      return real.call(request, ctx);
    },
  };
}

/** A job the agent schedules itself, an hour ahead: a Schedule in Temporal that a replay must not make again. */
const hourly = { action: 'create', name: 'hourly', schedule: { kind: 'every', intervalMs: 3_600_000 }, task: 'tick' };
/** Odd turns look an order up with the shop's tool; turn 10 schedules a job; the other even turns are plain. */
const messageOf = (turn: number) =>
  turn % 2 === 1
    ? `/tool shop__lookup_order {"orderId":"A${turn}"}`
    : turn === 10
      ? `/tool schedule ${JSON.stringify(hourly)}`
      : `hello ${turn}`;
/** The agent's jobs, and the Schedules Temporal holds for it. */
async function jobsAndSchedules(): Promise<{ jobs: number; schedules: number }> {
  const { rows } = await keel.pool.query<{ id: string }>('SELECT id FROM jobs WHERE agent_id = $1', [agent]);
  const ids = new Set(rows.map((r) => jobScheduleId(r.id)));
  let schedules = 0;
  for await (const s of keel.client.schedule.list()) if (ids.has(s.scheduleId)) schedules++;
  return { jobs: rows.length, schedules };
}

beforeAll(async () => {
  keel = await startTestKeel({ provider: (pool) => askedModel(scriptedProvider(pool)) });
  shop = await startShopHttp({ token: TOKEN });
  receiver = await startWebhookReceiver();
  await connectShop(keel, agent, shop, TOKEN);
  const delivery = { channel: 'webhook', url: receiver.url };
  for (let turn = 1; turn <= TURNS; turn++) {
    const res = await keel.post(agent, conversation, { text: messageOf(turn), delivery }, { wait: 30 });
    expect(res.body.status, JSON.stringify(res.body)).toBe('replied');
  }
  await receiver.waitFor((r) => r.length === TURNS, 30_000);
  expect(await jobsAndSchedules()).toEqual({ jobs: 1, schedules: 1 });
}, 180_000);
afterAll(async () => {
  await keel?.stop();
  await shop?.close();
  await receiver?.close();
});

const evaluate = (body: Record<string, unknown>) => evaluateAs(keel, agent, body);

const recorded = { recorded: { conversationIds: [conversation] } };
const modelCallRows = async () =>
  Number(
    (
      await keel.pool.query<{ n: string }>('SELECT count(*) AS n FROM model_calls WHERE conversation_key LIKE $1', [
        `%${agent}%`,
      ])
    ).rows[0]!.n,
  );
const evalSpendRows = async () =>
  Number(
    (
      await keel.pool.query<{ n: string }>(
        "SELECT count(*) AS n FROM model_spend WHERE agent_id = $1 AND kind = 'eval'",
        [agent],
      )
    ).rows[0]!.n,
  );

describe('replay: a recorded conversation against a candidate, with no model call', () => {
  it('replays 20 turns with tool calls with 0 model calls and passes against its own configuration', async () => {
    const [asksBefore, rowsBefore, shopBefore] = [asked.length, await modelCallRows(), shop.calls.length];
    const done = await evaluate({ mode: 'replay', ...recorded });
    expect(done.status).toBe('finished');
    expect(done.summary).toMatchObject({ cases: 1, passed: 1, failed: 0, modelCalls: 0 });
    const result = done.cases[0]!.result!;
    expect(result.reasons).toEqual([]);
    expect(result.passed).toBe(true);
    expect(result.firstDivergence).toBeUndefined();
    // The ledgers show none: no model call row, no spend row, no request to the model, no call of the tool server.
    expect(asked.length).toBe(asksBefore);
    expect(await modelCallRows()).toBe(rowsBefore);
    expect(await evalSpendRows()).toBe(0);
    expect(shop.calls.length).toBe(shopBefore);
  });

  it('reports exactly the turns that used a tool the candidate denies', async () => {
    const done = await evaluate({
      mode: 'replay',
      ...recorded,
      candidate: { toolPolicies: { shop__lookup_order: 'deny' } },
    });
    const result = done.cases[0]!.result!;
    expect(result.passed).toBe(false);
    expect(result.changedTurns).toEqual([1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);
    expect(result.reasons[0]).toBe("turn 1: shop__lookup_order was denied by the candidate's policy");
    // The tool is not offered: the first request already differs from the recorded one, in its tools.
    expect(result.firstDivergence).toMatchObject({ turn: 1, callIndex: 1, part: 'tools' });
    expect(result.firstDivergence!.diff).toContain('- shop__lookup_order');
  });

  it('reports the first request a changed system prompt makes differ, with a diff', async () => {
    const done = await evaluate({ mode: 'replay', ...recorded, candidate: { systemPrompt: 'Answer in French.' } });
    const result = done.cases[0]!.result!;
    expect(result.firstDivergence).toMatchObject({ turn: 1, callIndex: 1, part: 'system' });
    expect(result.firstDivergence!.diff).toContain('+ Answer in French.');
    // The recorded answers still do what they did.
    expect(result.passed).toBe(true);
  });

  it('selects recorded conversations by a query', async () => {
    const done = await evaluate({ mode: 'replay', recorded: { query: { withToolCalls: true, outcome: 'replied' } } });
    expect(done.cases.map((c) => [c.caseId, c.status])).toEqual([[`conversation:${conversation}`, 'passed']]);
    const none = await keel.call<{ error: { message: string } }>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'replay',
      recorded: { query: { outcome: 'budget_exhausted' } },
    });
    expect(none.status).toBe(400);
    expect(none.body.error.message).toBe('the evaluation selects no case');
  });

  it("stops each turn at the candidate's per-turn budget, as Keel reserves against it", async () => {
    const done = await evaluate({ mode: 'replay', ...recorded, candidate: { budgets: { perTurnUsd: 0.000001 } } });
    const result = done.cases[0]!.result!;
    expect(result.changedTurns).toHaveLength(TURNS);
    expect(result.reasons[0]).toBe('turn 1: ended budget_exhausted where the recording replied');
    expect(result.costUsd).toBe(0);
  });

  it('replays a turn range with the turns before it as context', async () => {
    const done = await evaluate({ mode: 'replay', recorded: { conversationIds: [conversation], turns: { from: 19 } } });
    expect(done.cases[0]).toMatchObject({ caseId: `conversation:${conversation}:19-20`, status: 'passed' });
    // Turns 1–18 are read as they were recorded: the requests are the recorded ones.
    expect(done.cases[0]!.result).toMatchObject({ turns: 2, reasons: [] });
    expect(done.cases[0]!.result!.firstDivergence).toBeUndefined();
  });

  it('refuses a selection it cannot take, saying why', async () => {
    const unknown = await keel.call<{ error: { code: string; message: string } }>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'replay',
      recorded: { conversationIds: ['never-was'] },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toBe('conversation never-was has no finished turn to replay');
    const none = await keel.call<{ error: { message: string } }>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'replay',
    });
    expect(none.status).toBe(400);
    expect(none.body.error.message).toContain('an evaluation needs recorded conversations, written cases, or both');
    const written = await keel.call<{ error: { message: string } }>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'replay',
      written: [{ name: 'w', messages: ['hi'] }],
    });
    expect(written.status).toBe(400);
    expect(written.body.error.message).toBe(
      'written cases have no recorded model answers to replay: run them in live-model mode',
    );
    const nul = await keel.call<{ error: { message: string } }>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'live-model',
      written: [{ name: 'nul', messages: ['a\u0000b'] }],
    });
    expect(nul.status).toBe(400);
    expect(nul.body.error.message).toBe(
      'invalid body: /written/0/messages/0 must not contain the NUL character (U+0000)',
    );
    // A lone surrogate is kept as U+FFFD, as Keel keeps text from outside: the case is taken.
    const lone = await keel.call<{ cases: { caseId: string }[] }>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'live-model',
      suite: 'x\ud800',
      written: [{ name: 'lone', messages: ['a\udc00b'] }],
    });
    expect(lone.status, lone.raw).toBe(202);
    expect(lone.body.cases.map((c) => c.caseId)).toEqual(['lone']);
    const memory = await keel.call<{ error: { message: string } }>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'replay',
      candidate: { memoryVersion: 99 },
      ...recorded,
    });
    expect(memory.status).toBe(400);
    expect(memory.body.error.message).toBe(`agent ${agent} has no memory version 99`);
  });
});

describe('fork: a conversation goes on from turn 5 under a candidate', () => {
  it('starts a conversation whose first model request holds exactly turns 1–5; the original is untouched', async () => {
    type Row = { role: string; text: string; turnId: string | null };
    const messages = async (c: string) => {
      const got = await keel.call<{ messages: Row[] }>('GET', `/v1/agents/${agent}/conversations/${c}?limit=200`);
      expect(got.status, got.raw).toBe(200);
      return got.body.messages;
    };
    const originalBefore = JSON.stringify(await messages(conversation));
    const forked = await keel.call<{ conversationId: string; atTurn: number; enabledTools: string[] }>(
      'POST',
      `/v1/agents/${agent}/conversations/${conversation}/forks`,
      { atTurn: 5 },
    );
    expect(forked.status, forked.raw).toBe(201);
    expect(forked.body).toMatchObject({ atTurn: 5, enabledTools: [] });
    const fork = forked.body.conversationId;
    const res = await keel.post(agent, fork, { text: 'hello again' }, { wait: 30 });
    expect(res.body.reply?.text).toBe('echo: hello again');

    const key = (c: string) => conversationWorkflowId(agent, c);
    const first = asked.find((a) => a.conversationKey === key(fork))!.request;
    // The original's turn 6 read turns 1–5 and its own message: the fork reads the same, with its own message.
    const turn6 = asked.filter((a) => a.conversationKey === key(conversation) && a.callIndex === 1)[5]!.request;
    const expected: ModelMessage[] = structuredClone(turn6.messages);
    const last = expected.at(-1)!.content.at(-1)!;
    expect(last).toEqual({ type: 'text', text: 'hello 6' });
    (last as { text: string }).text = 'hello again';
    expect(first.messages).toEqual(expected);
    expect(JSON.stringify(await messages(conversation))).toBe(originalBefore);
    // The fork shows the copied turns as they were, each in its turn, then its own.
    const [copied, source] = [await messages(fork), await messages(conversation)];
    const turnsOf = (rows: Row[]) => [...new Set(rows.map((r) => r.turnId))];
    expect(turnsOf(copied).slice(0, 5)).toEqual(turnsOf(source).slice(0, 5));
    expect(copied.filter((r) => r.role === 'user').map((r) => r.text)).toEqual([
      ...[1, 2, 3, 4, 5].map(messageOf),
      'hello again',
    ]);
  });

  it("answers a fork's tool calls as dry runs until a person enables the tool", async () => {
    const forked = await keel.call<{ conversationId: string }>(
      'POST',
      `/v1/agents/${agent}/conversations/${conversation}/forks`,
      { atTurn: 2 },
    );
    const fork = forked.body.conversationId;
    const dry = await keel.post(agent, fork, { text: '/tool shop__lookup_order {"orderId":"F1"}' }, { wait: 30 });
    expect(dry.body.reply?.text).toContain('dry run: shop__lookup_order was not called');
    expect(shop.calls.filter((c) => c.args.orderId === 'F1')).toEqual([]);
    // Keel's own tools that would act outside the fork stay dry runs, even when a person enables them.
    await keel.call('PUT', `/v1/agents/${agent}/conversations/${fork}/fork/effects`, { tools: ['schedule'] });
    const scheduled = await keel.post(agent, fork, { text: `/tool schedule ${JSON.stringify(hourly)}` }, { wait: 30 });
    expect(scheduled.body.reply?.text).toContain('dry run: schedule was not called');
    const spawned = await keel.post(
      agent,
      fork,
      { text: '/tool spawn_delegate {"text":"count","historyMode":"clean"}' },
      { wait: 30 },
    );
    expect(spawned.body.reply?.text).toContain('dry run: spawn_delegate was not called');
    expect(await jobsAndSchedules()).toEqual({ jobs: 1, schedules: 1 });
    const { rows: delegates } = await keel.pool.query('SELECT 1 FROM delegates WHERE conversation_key = $1', [
      conversationWorkflowId(agent, fork),
    ]);
    expect(delegates).toEqual([]);

    const enabled = await keel.call('PUT', `/v1/agents/${agent}/conversations/${fork}/fork/effects`, {
      tools: ['shop__lookup_order'],
    });
    expect(enabled.status, enabled.raw).toBe(200);
    const real = await keel.post(agent, fork, { text: '/tool shop__lookup_order {"orderId":"F2"}' }, { wait: 30 });
    expect(real.body.reply?.text).toBe('tool result: order F2: shipped');
    expect(shop.calls.filter((c) => c.args.orderId === 'F2')).toHaveLength(1);
  });

  it('refuses a fork past the turns the conversation has', async () => {
    const res = await keel.call<{ error: { message: string } }>(
      'POST',
      `/v1/agents/${agent}/conversations/${conversation}/forks`,
      { atTurn: 21 },
    );
    expect(res.status).toBe(400);
    expect(res.body.error.message).toBe(`conversation ${conversation} has 20 finished turns; it cannot fork at 21`);
  });
});

describe('nothing escapes an evaluation', () => {
  it('left the webhook receiver and the tool server silent through every evaluation', async () => {
    // Each recorded turn delivered once; no evaluation delivered anything, now that each has finished.
    expect(receiver.received).toHaveLength(TURNS);
    // The recording's own job and Schedule, and no other: the replays answered turn 10's schedule call from it.
    expect(await jobsAndSchedules()).toEqual({ jobs: 1, schedules: 1 });
    expect(shop.calls.filter((c) => String(c.args.orderId).startsWith('A'))).toHaveLength(TURNS / 2);
  });
});
