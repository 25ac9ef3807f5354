import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAnthropicProvider } from '../adapters/model/anthropic';
import { conversationWorkflowId } from '../domain/ids';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { loopbackEgress } from './support/egress';

let fake: FakeAnthropic;
let keel: TestKeel;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  keel = await startTestKeel({
    provider: () =>
      createAnthropicProvider({
        apiKey: 'sk-test-not-real',
        baseURL: fake.url,
        defaultModel: 'claude-test',
        egress: loopbackEgress,
      }),
  });
});
afterAll(async () => {
  await keel?.stop();
  await fake?.close();
});

function requestsSince(n: number) {
  return fake.requests.slice(n);
}

describe('the anthropic provider in a real turn, against a local Messages API', () => {
  it('completes a turn with a tool call and a streamed reply, recording usage per call', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const before = fake.requests.length;
    fake.enqueue(
      {
        kind: 'stream',
        text: 'Let me look.',
        toolUse: { name: 'lookup_weather', input: { city: 'Oslo' } },
        usage: { input_tokens: 120, output_tokens: 9 },
      },
      {
        kind: 'stream',
        toolUse: { name: 'reply', input: { text: 'It is raining in Oslo.' } },
        usage: { input_tokens: 140, output_tokens: 12, cache_read_input_tokens: 100 },
      },
    );
    const res = await keel.post(a, c, { text: 'weather in Oslo?' }, { wait: 30 });
    expect(res.status).toBe(200);
    expect(res.body.reply?.text).toBe('It is raining in Oslo.');

    const sent = requestsSince(before);
    expect(sent).toHaveLength(2);
    // The second call carries the tool's answer (an unknown tool here) after the model's tool call.
    const second = sent[1]!.body as {
      messages: { role: string; content: { type: string; tool_use_id?: string; is_error?: boolean }[] }[];
      stream: boolean;
    };
    expect(second.stream).toBe(true);
    const last = second.messages[second.messages.length - 1]!;
    expect(last.role).toBe('user');
    expect(last.content[0]).toMatchObject({ type: 'tool_result', is_error: true });

    const { rows } = await keel.pool.query<{
      call_index: number;
      input_tokens: number;
      output_tokens: number;
      cache_read_tokens: number;
      provider: string;
    }>(
      `SELECT call_index, input_tokens, output_tokens, cache_read_tokens, provider FROM model_calls
        WHERE conversation_key = $1 ORDER BY call_index`,
      [conversationWorkflowId(a, c)],
    );
    expect(rows).toEqual([
      { call_index: 1, input_tokens: 120, output_tokens: 9, cache_read_tokens: 0, provider: 'anthropic' },
      { call_index: 2, input_tokens: 140, output_tokens: 12, cache_read_tokens: 100, provider: 'anthropic' },
    ]);
  });

  it('delivers plain streamed text when the model calls no tool', async () => {
    fake.enqueue({ kind: 'stream', text: 'Plain words, streamed in pieces.' });
    const res = await keel.post(uniqueId('a'), uniqueId('c'), { text: 'say something' }, { wait: 30 });
    expect(res.body.status).toBe('replied');
    expect(res.body.reply?.text).toBe('Plain words, streamed in pieces.');
  });

  it("waits out a 429's Retry-After, then succeeds", async () => {
    const before = fake.requests.length;
    fake.enqueue(
      {
        kind: 'status',
        status: 429,
        errorType: 'rate_limit_error',
        message: 'slow down',
        headers: { 'retry-after': '3' },
      },
      { kind: 'stream', toolUse: { name: 'reply', input: { text: 'after the wait' } } },
    );
    const res = await keel.post(uniqueId('a'), uniqueId('c'), { text: 'hi' }, { wait: 60 });
    expect(res.body.reply?.text).toBe('after the wait');
    const [first, second] = requestsSince(before);
    // Temporal's own first retry would come after 1 s; the server asked for 3.
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(2_900);
  });

  it('retries a 529 overloaded answer', async () => {
    fake.enqueue(
      { kind: 'status', status: 529, errorType: 'overloaded_error', message: 'Overloaded' },
      { kind: 'stream', toolUse: { name: 'reply', input: { text: 'recovered' } } },
    );
    const res = await keel.post(uniqueId('a'), uniqueId('c'), { text: 'hi' }, { wait: 60 });
    expect(res.body.reply?.text).toBe('recovered');
  });

  it('fails the turn clearly on a 400, without retrying it', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const before = fake.requests.length;
    fake.enqueue({
      kind: 'status',
      status: 400,
      errorType: 'invalid_request_error',
      message: 'messages: roles must alternate',
    });
    const res = await keel.post(a, c, { text: 'hi' }, { wait: 30 });
    expect(res.body.status).toBe('error');
    expect(res.body.error?.code).toBe('model_request');
    expect(res.body.error?.message).toContain('roles must alternate');
    expect(requestsSince(before)).toHaveLength(1);
    // The conversation is not stuck: the next message gets a turn.
    fake.enqueue({ kind: 'stream', toolUse: { name: 'reply', input: { text: 'fine now' } } });
    expect((await keel.post(a, c, { text: 'again' }, { wait: 30 })).body.reply?.text).toBe('fine now');
  });
});
