import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectShop, evaluate, fakeAnthropicModel } from './support/evals';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startShopHttp, type ShopHttp } from './support/mcp-shop';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

/**
 * A live-model evaluation (issue 30) against the local Messages API: the candidate's model is really called, its tool
 * calls are answered from the recording (an unmatched one as a dry run, flagged), nothing is delivered or sent to the
 * tool server, and every call, the judge's too, is metered.
 */
let fake: FakeAnthropic;
let keel: TestKeel;
let shop: ShopHttp;
let receiver: WebhookReceiver;
const agent = uniqueId('live-evals');
const conversation = uniqueId('recorded');
const TOKEN = 'shop-bearer-live-evals-31';

beforeAll(async () => {
  fake = await startFakeAnthropic();
  keel = await startTestKeel({
    provider: () => fakeAnthropicModel(fake),
  });
  shop = await startShopHttp({ token: TOKEN });
  receiver = await startWebhookReceiver();
  await connectShop(keel, agent, shop, TOKEN);
  // The recording: the model looks the order up, then replies.
  fake.enqueue(
    { kind: 'stream', toolUse: { name: 'shop__lookup_order', input: { orderId: 'L1' } } },
    { kind: 'stream', toolUse: { name: 'reply', input: { text: 'Order L1 has shipped.' } } },
  );
  const delivery = { channel: 'webhook', url: receiver.url };
  const res = await keel.post(agent, conversation, { text: 'where is my order L1?', delivery }, { wait: 30 });
  expect(res.body.reply?.text).toBe('Order L1 has shipped.');
  await receiver.waitFor((r) => r.length === 1, 30_000);
}, 60_000);
afterAll(async () => {
  await keel?.stop();
  await shop?.close();
  await receiver?.close();
  await fake?.close();
});

describe('live-model: the candidate model, no effects', () => {
  it('calls the candidate model, answers tool calls from the recording, sends nothing, meters the cost', async () => {
    const [asked, shopCalls] = [fake.requests.length, shop.calls.length];
    const usage = { input_tokens: 1000, output_tokens: 100 };
    fake.enqueue(
      { kind: 'stream', toolUse: { name: 'shop__lookup_order', input: { orderId: 'L1' } }, usage },
      { kind: 'stream', toolUse: { name: 'shop__lookup_order', input: { orderId: 'L9' } }, usage },
      { kind: 'stream', toolUse: { name: 'reply', input: { text: 'L1 shipped; L9 I cannot see.' } }, usage },
      { kind: 'stream', text: 'PASS: it says the order shipped', usage },
    );
    const done = await evaluate(keel, agent, {
      mode: 'live-model',
      candidate: { model: 'claude-candidate' },
      recorded: { conversationIds: [conversation], expect: [{ judge: { rubric: 'The reply says L1 shipped.' } }] },
    });
    expect(done.status).toBe('finished');

    const sent = fake.requests.slice(asked).map((r) => r.body as { model: string; messages: unknown[] });
    expect(sent.map((r) => r.model)).toEqual([
      'claude-candidate',
      'claude-candidate',
      'claude-candidate',
      'claude-candidate',
    ]);
    // The second call reads the recorded result of the first lookup; the third, a dry run for the unseen order.
    const results = (i: number) => JSON.stringify(sent[i]!.messages.at(-1));
    expect(results(1)).toContain('order L1: shipped');
    expect(results(2)).toContain('dry run: shop__lookup_order was not called');

    const result = done.cases[0]!.result!;
    // The candidate's three calls and the judge's.
    expect(result.modelCalls).toBe(4);
    expect(result.reasons).toEqual([
      'turn 1: replied otherwise than the recording; ' +
        'shop__lookup_order was called with arguments the recording never saw',
    ]);
    // Metered like any call: the three turns' calls and the judge's, each in the spend ledger.
    const { rows } = await keel.pool.query<{ n: string; usd: string }>(
      "SELECT count(*) AS n, sum(cost_usd) AS usd FROM model_spend WHERE agent_id = $1 AND kind = 'eval'",
      [agent],
    );
    expect(Number(rows[0]!.n)).toBe(4);
    expect(Number(rows[0]!.usd)).toBeGreaterThan(0);
    expect(result.costUsd).toBeGreaterThan(0);
    // Nothing left Keel: no delivery, no call of the tool server.
    expect(receiver.received).toHaveLength(1);
    expect(shop.calls.length).toBe(shopCalls);
  });
});
