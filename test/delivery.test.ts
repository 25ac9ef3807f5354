import { randomBytes } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveryActivities } from '../activities/delivery';
import type { DeliverReplyInput } from '../domain/delivery';
import { noneTransport } from '../adapters/delivery/none';
import { slackTransport } from '../adapters/delivery/slack';
import { webhookTransport } from '../adapters/delivery/webhook';
import { acceptInbound, appendTranscript } from '../db/conversations';
import { parseEgressAllow } from '../domain/egress';
import { conversationWorkflowId } from '../domain/ids';
import { LIMITS } from '../domain/limits';
import { createEgressGuard } from '../adapters/egress';
import { startFakeSlack, type FakeSlack } from './support/fake-slack';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';
import { loopbackEgress } from './support/egress';
import { finishTurn } from '../services/conversation-turn';

let keel: TestKeel;
let slack: FakeSlack;

beforeAll(async () => {
  slack = await startFakeSlack();
  keel = await startTestKeel({
    transports: {
      slack: slackTransport({ token: 'xoxb-test', apiUrl: slack.url, owner: 'U0OWNER1', egress: loopbackEgress }),
    },
  });
});
afterAll(async () => {
  await keel?.stop();
  await slack?.close();
});

const receivers: WebhookReceiver[] = [];
afterAll(async () => Promise.all(receivers.map((r) => r.close())));
async function receiver(opts?: Parameters<typeof startWebhookReceiver>[0]): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver(opts);
  receivers.push(r);
  return r;
}

/** A Standard Webhooks secret as a person would generate one: whsec_ + base64 of 32 random bytes. */
const whsec = () => `whsec_${randomBytes(32).toString('base64')}`;

describe('reply delivery in a turn', () => {
  it('signs a webhook per Standard Webhooks; webhook-id is the reply’s idempotency key', async () => {
    const secret = whsec();
    const hook = await receiver({ secret, rejectUnverified: true });
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const res = await keel.post(
      a,
      c,
      { text: 'signed', delivery: { channel: 'webhook', url: hook.url, secret } },
      { wait: 30 },
    );
    expect(res.body.reply?.delivery).toEqual({ outcome: 'delivered', attempts: 1 });
    expect(hook.received).toHaveLength(1);
    expect(hook.received[0]!.validSignature).toBe(true);
    const key = `${conversationWorkflowId(a, c)}/turn/${res.body.turnId}/reply/1`;
    expect(hook.received[0]!.headers['webhook-id']).toBe(key);
    expect(hook.received[0]!.headers['idempotency-key']).toBe(key);
    expect(hook.received[0]!.body).toMatchObject({ idempotencyKey: key, text: 'echo: signed' });
  });

  it('a plain secret, as before, signs too: a receiver verifies it with the library as raw bytes', async () => {
    const hook = await receiver({ secret: 's3cret', rejectUnverified: true });
    const res = await keel.post(
      uniqueId('a'),
      uniqueId('c'),
      { text: 'plain', delivery: { channel: 'webhook', url: hook.url, secret: 's3cret' } },
      { wait: 30 },
    );
    expect(res.body.reply?.delivery).toEqual({ outcome: 'delivered', attempts: 1 });
    expect(hook.received[0]!.validSignature).toBe(true);
  });

  it('a receiver holding another secret refuses the delivery: dropped:http_401, not retried', async () => {
    const hook = await receiver({ secret: whsec(), rejectUnverified: true });
    const res = await keel.post(
      uniqueId('a'),
      uniqueId('c'),
      { text: 'wrong key', delivery: { channel: 'webhook', url: hook.url, secret: whsec() } },
      { wait: 30 },
    );
    expect(res.body.reply?.delivery).toEqual({ outcome: 'dropped:http_401', attempts: 1 });
    expect(hook.received.map((r) => [r.status, r.validSignature, r.verifyError])).toEqual([
      [401, false, 'No matching signature found'],
    ]);
  });

  it('a conversation id with dots gets a webhook-id without dots that decodes to the key, and verifies', async () => {
    const secret = whsec();
    const hook = await receiver({ secret, rejectUnverified: true });
    const [a, c] = [uniqueId('a.b'), uniqueId('c.d')];
    const res = await keel.post(
      a,
      c,
      { text: 'dots', delivery: { channel: 'webhook', url: hook.url, secret } },
      { wait: 30 },
    );
    expect(res.body.reply?.delivery).toEqual({ outcome: 'delivered', attempts: 1 });
    const id = String(hook.received[0]!.headers['webhook-id']);
    expect(id).not.toContain('.');
    expect(decodeURIComponent(id)).toBe(`${conversationWorkflowId(a, c)}/turn/${res.body.turnId}/reply/1`);
    expect(hook.received[0]!.validSignature).toBe(true);
  });

  it('retries a failing webhook with one webhook-id, each attempt signed afresh and recorded', async () => {
    const secret = whsec();
    const hook = await receiver({ secret, failFirst: 2, failStatus: 503 });
    const res = await keel.post(
      uniqueId('a'),
      uniqueId('c'),
      { text: 'persist', delivery: { channel: 'webhook', url: hook.url, secret } },
      { wait: 60 },
    );
    expect(res.body.reply?.delivery).toEqual({ outcome: 'delivered', attempts: 3 });
    expect(hook.received.map((r) => [r.status, r.validSignature])).toEqual([
      [503, true],
      [503, true],
      [200, true],
    ]);
    const ids = hook.received.map((r) => r.headers['webhook-id']);
    expect(ids).toEqual([ids[0], ids[0], ids[0]]);
    expect(ids[0]).toMatch(new RegExp(`/turn/${res.body.turnId}/reply/1$`));
    expect(new Set(hook.received.map((r) => r.headers['idempotency-key']))).toEqual(new Set([ids[0]]));
    expect([...hook.byIdempotencyKey().values()]).toEqual([1]);
  });

  it('records dropped:http_404 when the target refuses for good, without retrying', async () => {
    const hook = await receiver({ failFirst: 100, failStatus: 404 });
    const res = await keel.post(
      uniqueId('a'),
      uniqueId('c'),
      { text: 'nobody home', delivery: { channel: 'webhook', url: hook.url } },
      { wait: 30 },
    );
    expect(res.body.status).toBe('replied');
    expect(res.body.reply?.delivery).toEqual({ outcome: 'dropped:http_404', attempts: 1 });
    expect(hook.received).toHaveLength(1);
  });

  it('delivers to Slack through the Web API, resolving the owner target', async () => {
    const calls = slack.calls.length;
    const toChannel = await keel.post(
      uniqueId('a'),
      uniqueId('c'),
      { text: 'to the channel', delivery: { channel: 'slack', target: 'C0123ABCD' } },
      { wait: 30 },
    );
    expect(toChannel.body.reply?.delivery.outcome).toBe('delivered');
    const toOwner = await keel.post(
      uniqueId('a'),
      uniqueId('c'),
      { text: 'to the owner', delivery: { channel: 'slack', target: 'owner' } },
      { wait: 30 },
    );
    expect(toOwner.body.reply?.delivery.outcome).toBe('delivered');
    expect(slack.calls.slice(calls).map((c) => [c.method, c.body.channel, c.body.text])).toEqual([
      ['chat.postMessage', 'C0123ABCD', 'echo: to the channel'],
      ['chat.postMessage', 'U0OWNER1', 'echo: to the owner'],
    ]);
  });

  it('keeps a conversation’s delivery for later messages that name none', async () => {
    const hook = await receiver();
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await keel.post(a, c, { text: 'one', delivery: { channel: 'webhook', url: hook.url } }, { wait: 30 });
    const second = await keel.post(a, c, { text: 'two' }, { wait: 30 });
    expect(second.body.reply?.delivery.outcome).toBe('delivered');
    expect(hook.received.map((r) => (r.body as { text: string }).text)).toEqual(['echo: one', 'echo: two']);
  });
});

describe('the delivery activity and the effects ledger', () => {
  async function seedTurn(hookUrl: string): Promise<DeliverReplyInput> {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    const turnId = uniqueId('turn');
    await acceptInbound(keel.pool, {
      conversationKey: key,
      agentId: a,
      conversationId: c,
      turnId,
      startsTurn: true,
      message: { messageId: 'm1', text: 'hi', mode: 'queue', delivery: { channel: 'webhook', url: hookUrl } },
    });
    const replySeq = await appendTranscript(keel.pool, key, turnId, [
      { role: 'assistant', content: [{ type: 'text', text: 'hello' }], text: '', origin: 'test' },
    ]);
    return {
      conversationKey: key,
      agentId: a,
      conversationId: c,
      turnId,
      replySeq,
      text: 'hello',
      effectKey: `${key}/turn/${turnId}/reply/1`,
    };
  }

  const quiet = { logger: new DefaultLogger('ERROR') };
  // The receivers are on 127.0.0.1: loopback is allowed explicitly.
  const egress = createEgressGuard({ allow: parseEgressAllow('loopback') });
  afterAll(() => egress.close());
  const activities = () =>
    deliveryActivities({
      pool: keel.pool,
      transports: { none: noneTransport(), webhook: webhookTransport({ egress }), slack: slackTransport({ egress }) },
    });

  it('never sends a settled effect twice: a retried or replayed delivery answers from the ledger', async () => {
    const hook = await receiver();
    const input = await seedTurn(hook.url);
    const env = new MockActivityEnvironment();
    const first = await env.run(activities().deliverReply, input);
    const again = await env.run(activities().deliverReply, input);
    expect(first).toEqual({ outcome: 'delivered', attempts: 1 });
    expect(again).toEqual(first);
    expect(hook.received).toHaveLength(1);
  });

  it("a turn's last reply is sent once and its end committed once, however often the step runs", async () => {
    const hook = await receiver();
    const input = {
      ...(await seedTurn(hook.url)),
      modelCalls: 2,
      toolResults: { callIndex: 2, results: [{ type: 'tool_result' as const, tool_use_id: 'toolu_a', content: 'ok' }] },
      replyToolUseId: 'toolu_reply',
    };
    const first = await new MockActivityEnvironment().run(activities().deliverFinalReply, input);
    const again = await new MockActivityEnvironment({ attempt: 2 }).run(activities().deliverFinalReply, input);
    expect(first).toEqual({ outcome: 'delivered', attempts: 1 });
    expect(again).toEqual(first);
    expect(hook.received).toHaveLength(1);
    const turn = await keel.pool.query<{ status: string; reply_seq: number; model_calls: number }>(
      'SELECT status, reply_seq, model_calls FROM turns WHERE turn_id = $1',
      [input.turnId],
    );
    expect(turn.rows).toEqual([{ status: 'replied', reply_seq: input.replySeq, model_calls: 2 }]);
    // The model reads both results of its last call, the reply's naming its outcome, once.
    const results = await keel.pool.query<{ content: unknown }>(
      "SELECT content FROM messages WHERE conversation_key = $1 AND turn_id = $2 AND role = 'tool' AND seq > $3",
      [input.conversationKey, input.turnId, input.replySeq],
    );
    expect(results.rows.map((r) => r.content)).toEqual([
      [
        { type: 'tool_result', tool_use_id: 'toolu_a', content: 'ok' },
        { type: 'tool_result', tool_use_id: 'toolu_reply', content: 'reply delivered' },
      ],
    ]);
    const finished = await keel.pool.query(
      "SELECT 1 FROM conversation_events WHERE conversation_key = $1 AND type = 'turn.finished'",
      [input.conversationKey],
    );
    expect(finished.rowCount).toBe(1);
  });

  it("a reply that was sent stays the turn's end: an interrupt committed after it changes nothing", async () => {
    const hook = await receiver();
    const input = { ...(await seedTurn(hook.url)), modelCalls: 1 };
    await new MockActivityEnvironment().run(activities().deliverFinalReply, input);
    // The workflow saw an interrupt after a model step had sent the reply (the step retried, then was cancelled).
    const interrupted = { code: 'interrupted' as const, message: 'interrupted by a newer message' };
    const end = { status: 'interrupted' as const, error: interrupted };
    const { conversationKey, turnId } = input;
    await new MockActivityEnvironment().run(() =>
      finishTurn({ pool: keel.pool }, { conversationKey, turnId, end, modelCalls: 1 }),
    );
    const turn = await keel.pool.query('SELECT status, reply_seq FROM turns WHERE turn_id = $1', [input.turnId]);
    expect(turn.rows).toEqual([{ status: 'replied', reply_seq: input.replySeq }]);
    const notes = await keel.pool.query(
      "SELECT 1 FROM messages WHERE conversation_key = $1 AND turn_id = $2 AND text LIKE 'turn interrupted%'",
      [input.conversationKey, input.turnId],
    );
    expect(notes.rowCount).toBe(0);
    expect(hook.received).toHaveLength(1);
  });

  it(`records error:<why> after ${LIMITS.deliveryAttempts} failed send attempts, and stops sending`, async () => {
    const hook = await receiver({ failFirst: 1000, failStatus: 503 });
    const input = await seedTurn(hook.url);
    for (let attempt = 1; attempt < LIMITS.deliveryAttempts; attempt++) {
      await expect(
        new MockActivityEnvironment({ attempt }, quiet).run(activities().deliverReply, input),
      ).rejects.toThrow(/failed: http_503/);
    }
    const last = await new MockActivityEnvironment({ attempt: LIMITS.deliveryAttempts }, quiet).run(
      activities().deliverReply,
      input,
    );
    expect(last).toEqual({ outcome: 'error:http_503', attempts: LIMITS.deliveryAttempts });
    expect(await new MockActivityEnvironment().run(activities().deliverReply, input)).toEqual(last);
    expect(hook.received).toHaveLength(LIMITS.deliveryAttempts);
    const { rows } = await keel.pool.query<{ outcome: string; attempts: number; last_error: string }>(
      'SELECT outcome, attempts, last_error FROM deliveries WHERE effect_key = $1',
      [input.effectKey],
    );
    expect(rows[0]).toEqual({ outcome: 'error:http_503', attempts: LIMITS.deliveryAttempts, last_error: 'http_503' });
  });
});
