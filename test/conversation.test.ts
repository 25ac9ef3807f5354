import { replayHistories } from '../services/replay';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { LIMITS } from '../domain/limits';
import { stateQuery } from '../contracts/conversation';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';
import { eventually, queueAnswer, startTestKeel, streamingText, uniqueId, type TestKeel } from './support/keel';
import { inject } from 'vitest';

let keel: TestKeel;
let hook: WebhookReceiver;

beforeAll(async () => {
  keel = await startTestKeel();
  hook = await startWebhookReceiver();
});
afterAll(async () => {
  await keel?.stop();
  await hook?.close();
});

interface Transcript {
  state: { busy: boolean; queued: number };
  messages: { seq: number; role: string; text: string; turnId: string | null }[];
}

async function transcript(agentId: string, conversationId: string): Promise<Transcript> {
  const res = await keel.api.inject({
    method: 'GET',
    url: `/v1/agents/${agentId}/conversations/${conversationId}?limit=1000`,
  });
  expect(res.statusCode).toBe(200);
  return res.json<Transcript>();
}

async function turnRows(conversationKey: string) {
  const { rows } = await keel.pool.query<{
    turn_id: string;
    status: string;
    error: { code: string; message: string } | null;
  }>('SELECT turn_id, status, error FROM turns WHERE conversation_key = $1 ORDER BY accepted_order', [conversationKey]);
  return rows;
}

describe('a conversation turn', () => {
  it('answers a plain message with the scripted echo and runs as workflow conv:<agent>:<conversation>', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const res = await keel.post(a, c, { text: 'hello' }, { wait: 30 });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('replied');
    expect(res.body.reply?.text).toBe('echo: hello');
    const described = await keel.client.workflow.getHandle(conversationWorkflowId(a, c)).describe();
    expect(described.type).toBe('conversationWorkflow');
    expect(described.status.name).toBe('RUNNING');
    const t = await transcript(a, c);
    expect(t.messages.map((m) => [m.role, m.text])).toEqual([
      ['user', 'hello'],
      ['assistant', 'echo: hello'],
      ['tool', 'reply skipped:channel_none'],
    ]);
  });

  it('answers 202 accepted without wait, and the reply arrives at the webhook', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const res = await keel.post(a, c, { text: 'later', delivery: { channel: 'webhook', url: hook.url } });
    expect(res.status).toBe(202);
    expect(res.body.status).toBe('accepted');
    await hook.waitFor((r) => r.some((x) => (x.body as { turnId?: string }).turnId === res.body.turnId), 30_000);
    const got = hook.received.filter((x) => (x.body as { turnId?: string }).turnId === res.body.turnId);
    expect(got).toHaveLength(1);
    expect(got[0]!.body).toMatchObject({ agentId: a, conversationId: c, text: 'echo: later' });
    expect(got[0]!.headers['idempotency-key']).toBeTruthy();
  });

  it('gives one turn for one messageId, however often it is posted', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const first = await keel.post(a, c, { text: 'once', messageId: 'm-1' }, { wait: 30 });
    const again = await keel.post(a, c, { text: 'once', messageId: 'm-1' }, { wait: 30 });
    expect(again.body.turnId).toBe(first.body.turnId);
    expect(again.body.reply?.text).toBe('echo: once');
    expect(await turnRows(conversationWorkflowId(a, c))).toHaveLength(1);
    const t = await transcript(a, c);
    expect(t.messages.filter((m) => m.role === 'user')).toHaveLength(1);
  });

  it('answers 20 concurrent messages once each, in the order they were accepted', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const delivery = { channel: 'webhook', url: hook.url };
    const posts = await Promise.all(
      Array.from({ length: 20 }, (_, i) => keel.post(a, c, { text: `message ${i}`, messageId: `m-${i}`, delivery })),
    );
    expect(posts.filter((p) => p.status !== 202).map((p) => JSON.stringify(p.body))).toEqual([]);
    expect(new Set(posts.map((p) => p.body.turnId)).size).toBe(20);
    const key = conversationWorkflowId(a, c);
    await eventually(
      async () => (await turnRows(key)).every((t) => t.status === 'replied') && (await turnRows(key)).length === 20,
      60_000,
      '20 replies',
    );

    const t = await transcript(a, c);
    const users = t.messages.filter((m) => m.role === 'user');
    const replies = t.messages.filter((m) => m.role === 'assistant');
    expect(users).toHaveLength(20);
    expect(replies).toHaveLength(20);
    // Each reply follows its own message before the next message is taken: turns ran one at a time, in order.
    for (let i = 0; i < 20; i++) {
      const u = users[i]!;
      const r = replies[i]!;
      expect(r.text).toBe(`echo: ${u.text}`);
      expect(r.turnId).toBe(u.turnId);
      if (i > 0) expect(u.seq).toBeGreaterThan(replies[i - 1]!.seq);
    }
    // The turns started in the transcript's order, each after the one before it had ended.
    const { rows: started } = await keel.pool.query<{ turn_id: string }>(
      'SELECT turn_id FROM turns WHERE conversation_key = $1 ORDER BY started_at',
      [key],
    );
    expect(users.map((u) => u.turnId)).toEqual(started.map((x) => x.turn_id));
    // The webhook heard each reply exactly once, in the transcript's order.
    const received = hook.received.filter((x) => (x.body as { conversationId?: string }).conversationId === c);
    expect(received.map((x) => (x.body as { text: string }).text)).toEqual(replies.map((r) => r.text));
  });

  it('runs a queued message after the running turn, and says it was queued', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const first = await keel.post(a, c, { text: '/delay 6000 first' });
    expect(first.body.status).toBe('accepted');
    const second = await keel.post(a, c, { text: 'second' });
    expect(second.body.status).toBe('queued');
    // The first turn may still be starting: it is running, and the second waits behind it.
    await eventually(
      async () => {
        const { state } = await transcript(a, c);
        return state.busy && state.queued === 1;
      },
      5_000,
      'the first turn to run with the second queued',
    );
    const done = await keel.post(a, c, { text: 'second', messageId: second.body.messageId }, { wait: 30 });
    expect(done.status).toBe(200);
    expect(done.body.reply?.text).toBe('echo: second');
    // The reply is recorded first; the workflow is idle once the turn's last activity (events, reflection) returns.
    await eventually(
      async () => {
        const { state } = await transcript(a, c);
        return !state.busy && state.queued === 0;
      },
      10_000,
      'the conversation to be idle',
    );
    const t = await transcript(a, c);
    expect(t.messages.filter((m) => m.role === 'user').map((m) => m.text)).toEqual(['/delay 6000 first', 'second']);
  });

  it('steers a message into the running turn at its next model call', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    // The first model call takes 4 s and asks for a tool, so the turn makes a second model call. A message reaches a
    // turn whose model call is out when its workflow task is extended (every 2.4 s): the steer comes in meanwhile.
    await queueAnswer(keel, a, c, {
      content: [{ type: 'tool_use', id: 'toolu_1', name: 'look_around', input: {} }],
      stopReason: 'tool_use',
      usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
      delayMs: 4000,
    });
    const first = await keel.post(a, c, { text: 'start' });
    await eventually(async () => (await turnRows(key))[0]?.status === 'running', 10_000, 'turn running');
    const steer = await keel.post(a, c, { text: 'actually, this', mode: 'steer' }, { wait: 30 });
    expect(steer.status).toBe(200);
    expect(steer.body.turnId).toBe(first.body.turnId);
    expect(steer.body.reply?.text).toBe('echo: actually, this');
    expect(await turnRows(key)).toHaveLength(1);
  });

  it('interrupts the running model call, keeps its partial text, and answers the new message', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    const first = await keel.post(a, c, { text: '/delay 6000 one two three four five six seven eight nine ten' });
    // Wait until the model call reports streamed text in its heartbeat.
    await streamingText(keel.pool, key, 10_000);
    const second = await keel.post(a, c, { text: 'stop', mode: 'interrupt' }, { wait: 30 });
    expect(second.body.reply?.text).toBe('echo: stop');
    const turns = await turnRows(key);
    expect(turns.map((t) => t.status)).toEqual(['interrupted', 'replied']);
    expect(turns[0]!.turn_id).toBe(first.body.turnId);
    const t = await transcript(a, c);
    const partial = t.messages.find((m) => m.role === 'assistant' && m.turnId === first.body.turnId);
    expect(partial?.text).toMatch(/^echo: one.*\[interrupted\]$/);
  });
});

describe('a run that ended abnormally', () => {
  it('leaves no accepted message unanswered: the next run takes up the open turns, oldest first', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    const running = await keel.post(a, c, { text: '/delay 3000 was running' });
    const queued = await keel.post(a, c, { text: 'was queued' });
    expect(queued.body.status).toBe('queued');
    await keel.client.workflow.getHandle(key).terminate('operator terminated the run');
    const next = await keel.post(a, c, { text: 'after the terminate' }, { wait: 60 });
    expect(next.body.reply?.text).toBe('echo: after the terminate');
    const turns = await turnRows(key);
    expect(turns.map((t) => [t.turn_id, t.status])).toEqual([
      [running.body.turnId, 'replied'],
      [queued.body.turnId, 'replied'],
      [next.body.turnId, 'replied'],
    ]);
    const t = await transcript(a, c);
    expect(t.messages.filter((m) => m.role === 'assistant').map((m) => m.text)).toEqual([
      'echo: was running',
      'echo: was queued',
      'echo: after the terminate',
    ]);
  });
});

describe('limits of a turn', () => {
  it(`ends a turn that makes ${LIMITS.modelCallsPerTurn} model calls without replying`, async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    for (let i = 0; i < LIMITS.modelCallsPerTurn + 1; i++) {
      await queueAnswer(keel, a, c, {
        content: [{ type: 'tool_use', id: `toolu_${i}`, name: 'keep_busy', input: {} }],
        stopReason: 'tool_use',
        usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
      });
    }
    const res = await keel.post(a, c, { text: 'loop forever' }, { wait: 30 });
    expect(res.body.status).toBe('error');
    expect(res.body.error?.code).toBe('max_model_calls');
    const { rows } = await keel.pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM model_calls WHERE conversation_key = $1',
      [key],
    );
    expect(Number(rows[0]!.n)).toBe(LIMITS.modelCallsPerTurn);
    // Every tool call got its answer, so the transcript stays valid for the next turn.
    const next = await keel.post(a, c, { text: 'and now?' }, { wait: 30 });
    expect(next.body.reply?.text).toBe('echo: and now?');
  });
});

describe('the scripted command language', () => {
  it('/skip ends the turn without a reply', async () => {
    const res = await keel.post(uniqueId('a'), uniqueId('c'), { text: '/skip' }, { wait: 30 });
    expect(res.body.status).toBe('skipped');
    expect(res.body.reply).toBeUndefined();
  });

  it('/fail 2 is absorbed by Temporal retries of the model call', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const res = await keel.post(a, c, { text: '/fail 2 eventually' }, { wait: 60 });
    expect(res.body.reply?.text).toBe('echo: eventually');
    const { rows } = await keel.pool.query<{ attempt: number; error: string | null }>(
      'SELECT attempt, error FROM model_calls WHERE conversation_key = $1 ORDER BY attempt',
      [conversationWorkflowId(a, c)],
    );
    expect(rows.map((r) => [r.attempt, r.error === null])).toEqual([
      [1, false],
      [2, false],
      [3, true],
    ]);
  });

  it('/error 1 ends the first turn in an error and lets the second through', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const first = await keel.post(a, c, { text: '/error 1 flaky' }, { wait: 30 });
    expect(first.body.status).toBe('error');
    expect(first.body.error?.code).toBe('model_error');
    const second = await keel.post(a, c, { text: '/error 1 flaky' }, { wait: 30 });
    expect(second.body.reply?.text).toBe('echo: flaky');
  });

  it('/tool calls a tool and the model reads its answer', async () => {
    const res = await keel.post(uniqueId('a'), uniqueId('c'), { text: '/tool no_such_tool {"x":1}' }, { wait: 30 });
    expect(res.body.reply?.text).toBe('tool error: unknown tool "no_such_tool"');
  });

  it('/leak never reaches the webhook: the guard blocks it and the model reads the guard error', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const res = await keel.post(a, c, { text: '/leak', delivery: { channel: 'webhook', url: hook.url } }, { wait: 30 });
    expect(res.body.status).toBe('error');
    expect(res.body.error?.code).toBe('reply_blocked');
    expect(hook.received.filter((x) => (x.body as { conversationId?: string }).conversationId === c)).toHaveLength(0);
    const t = await transcript(a, c);
    const guardErrors = t.messages.filter(
      (m) => m.role === 'tool' && m.text.includes('Reply blocked by the reply guard'),
    );
    // The first blocked reply and two corrections: three model calls, each told why.
    expect(guardErrors).toHaveLength(3);
    expect(t.messages.filter((m) => m.role === 'assistant')).toHaveLength(3);
    expect(JSON.stringify(t.messages)).not.toContain('sk-ant-');
  });
});

describe('workflow history', () => {
  it('stays flat: the bytes added by turn 50 are within 20% of those added by turn 2', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const handle = keel.client.workflow.getHandle(conversationWorkflowId(a, c));
    const sizes: number[] = [];
    for (let i = 1; i <= 50; i++) {
      const res = await keel.post(a, c, { text: `turn number ${String(i).padStart(2, '0')}` }, { wait: 30 });
      expect(res.body.status).toBe('replied');
      // The turn's last event is written when its last step completes; wait for the workflow task that follows.
      await eventually(async () => !(await handle.query(stateQuery)).busy, 5_000, 'idle');
      sizes.push((await handle.describe()).historySize ?? 0);
    }
    const added = (turn: number): number => sizes[turn - 1]! - sizes[turn - 2]!;
    expect(added(2)).toBeGreaterThan(0);
    expect(Math.abs(added(50) - added(2)) / added(2)).toBeLessThanOrEqual(0.2);
  });

  it('replays its recorded history against the current workflow code', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await keel.post(a, c, { text: 'first' }, { wait: 30 });
    await keel.post(a, c, { text: '/tool no_such_tool {}' }, { wait: 30 });
    await keel.post(a, c, { text: '/leak' }, { wait: 30 });
    const workflowId = conversationWorkflowId(a, c);
    const history = await keel.client.workflow.getHandle(workflowId).fetchHistory();
    // As Keel's replay step does it: what the run did through its last completed workflow task.
    const bundle = { workflowBundle: { codePath: inject('workflowBundlePath') } };
    expect(await replayHistories(bundle, [{ workflowId, history }])).toMatchObject([{ workflowId, ok: true }]);
  });
});
