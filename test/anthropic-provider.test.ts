import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAnthropicProvider } from '../adapters/model/anthropic';
import {
  ModelRequestError,
  ModelRetryableError,
  type ModelCallContext,
  type ModelProvider,
  type ModelRequest,
} from '../domain/model';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic';
import { loopbackEgress } from './support/egress';

const API_KEY = 'sk-ant-test-key';

function makeCtx(onDelta?: (delta: string, controller: AbortController) => void) {
  const controller = new AbortController();
  const deltas: string[] = [];
  const counts = { heartbeats: 0 };
  const ctx: ModelCallContext = {
    attempt: 1,
    conversationKey: 'conv-1',
    turnId: 'turn-1',
    callIndex: 1,
    onTextDelta: (delta) => {
      deltas.push(delta);
      onDelta?.(delta, controller);
    },
    heartbeat: () => void counts.heartbeats++,
    signal: controller.signal,
    sleep: (ms) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, ms);
        controller.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(controller.signal.reason as Error);
        });
      }),
  };
  return { ctx, controller, deltas, counts };
}

function request(overrides: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model: 'claude-test-model',
    system: 'You are a test agent.',
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'look something up' }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'x' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'found x' }] },
    ],
    tools: [
      {
        name: 'lookup',
        description: 'Look something up',
        input_schema: { type: 'object', properties: { q: { type: 'string' } } },
      },
      {
        name: 'reply',
        description: 'Reply to the user',
        input_schema: { type: 'object', properties: { text: { type: 'string' } } },
      },
    ],
    maxTokens: 1024,
    ...overrides,
  };
}

describe('anthropic provider against a fake Messages API', () => {
  let fake: FakeAnthropic;
  let provider: ModelProvider;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    provider = createAnthropicProvider({
      apiKey: API_KEY,
      baseURL: fake.url,
      defaultModel: 'claude-default',
      egress: loopbackEgress,
    });
  });
  afterAll(async () => {
    await fake.close();
  });

  it('turns a streamed tool_use answer into a ModelResponse with parsed input and mapped usage', async () => {
    fake.enqueue({
      kind: 'stream',
      toolUse: { name: 'reply', input: { text: 'hello there', nested: { n: 1, list: [1, 2] } } },
      usage: { input_tokens: 120, output_tokens: 33, cache_read_input_tokens: 1000, cache_creation_input_tokens: 50 },
    });
    const { ctx, counts } = makeCtx();

    const res = await provider.call(request(), ctx);

    expect(res.stopReason).toBe('tool_use');
    expect(res.content).toEqual([
      {
        type: 'tool_use',
        id: expect.stringMatching(/^toolu_fake_/) as unknown,
        name: 'reply',
        input: { text: 'hello there', nested: { n: 1, list: [1, 2] } },
      },
    ]);
    expect(res.usage).toEqual({ inputTokens: 120, outputTokens: 33, cacheReadTokens: 1000, cacheWriteTokens: 50 });
    expect(res.model).toBe('claude-test-model');
    expect(counts.heartbeats).toBeGreaterThan(0);
  });

  it('passes streamed text deltas through onTextDelta in order', async () => {
    const text = 'The quick brown fox jumps over the lazy dog.';
    fake.enqueue({ kind: 'stream', text });
    const { ctx, deltas } = makeCtx();

    const res = await provider.call(request(), ctx);

    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe(text);
    expect(res.content).toEqual([{ type: 'text', text }]);
    expect(res.stopReason).toBe('end_turn');
  });

  it('sends a streaming request with cache breakpoints and the API key; the caller’s request is kept', async () => {
    fake.enqueue({ kind: 'stream', text: 'ok' });
    const req = request();
    const before = structuredClone(req);
    const sent = fake.requests.length;

    await provider.call(req, makeCtx().ctx);

    expect(req).toEqual(before);
    const received = fake.requests[sent];
    expect(received).toBeDefined();
    const body = received?.body as {
      stream?: unknown;
      model?: unknown;
      max_tokens?: unknown;
      system?: { type: string; text: string; cache_control?: unknown }[];
      tools?: { name: string; cache_control?: unknown }[];
      messages?: { role: string; content: { type: string; cache_control?: unknown }[] }[];
    };
    expect(body.stream).toBe(true);
    expect(body.model).toBe('claude-test-model');
    expect(body.max_tokens).toBe(1024);
    expect(body.system).toEqual([
      { type: 'text', text: 'You are a test agent.', cache_control: { type: 'ephemeral' } },
    ]);
    expect(body.tools?.map((t) => t.cache_control)).toEqual([undefined, { type: 'ephemeral' }]);
    // The breakpoint sits on the stable prefix: the second-to-last message's last block, nowhere else.
    expect(body.messages?.map((m) => m.content.map((b) => b.cache_control))).toEqual([
      [undefined],
      [{ type: 'ephemeral' }],
      [undefined],
    ]);
    // SDK 1.14 sends the key as a bearer token; older SDKs (and curl examples) use x-api-key. Either carries it.
    const auth = received?.headers['x-api-key'] ?? received?.headers.authorization;
    expect([API_KEY, `Bearer ${API_KEY}`]).toContain(auth);
  });

  it('uses the default model when the request names none', async () => {
    fake.enqueue({ kind: 'stream', text: 'ok' });
    const sent = fake.requests.length;
    const res = await provider.call(request({ model: '' }), makeCtx().ctx);
    expect((fake.requests[sent]?.body as { model?: unknown }).model).toBe('claude-default');
    expect(res.model).toBe('claude-default');
  });

  it('maps 429 with retry-after to ModelRetryableError carrying the delay', async () => {
    fake.enqueue({
      kind: 'status',
      status: 429,
      errorType: 'rate_limit_error',
      message: 'Number of requests has exceeded your rate limit',
      headers: { 'retry-after': '2' },
    });
    const err = await provider.call(request(), makeCtx().ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelRetryableError);
    expect((err as ModelRetryableError).retryAfterMs).toBe(2000);
    expect((err as ModelRetryableError).message).toContain('rate_limit_error');
  });

  it('makes exactly one HTTP request per call: the SDK does not retry behind Temporal’s back', async () => {
    // Were the SDK to retry, its second request would get the fake's default answer and the call would succeed.
    fake.enqueue({ kind: 'status', status: 503, errorType: 'api_error', message: 'unavailable' });
    const sent = fake.requests.length;
    await expect(provider.call(request(), makeCtx().ctx)).rejects.toBeInstanceOf(ModelRetryableError);
    expect(fake.requests.length).toBe(sent + 1);
  });

  it('maps 529 overloaded to ModelRetryableError', async () => {
    fake.enqueue({ kind: 'status', status: 529, errorType: 'overloaded_error', message: 'Overloaded' });
    const err = await provider.call(request(), makeCtx().ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelRetryableError);
    expect((err as ModelRetryableError).retryAfterMs).toBeUndefined();
  });

  it('maps an error event inside the SSE stream to ModelRetryableError', async () => {
    fake.enqueue({
      kind: 'stream',
      text: 'partial answer that breaks off',
      midStreamError: { errorType: 'overloaded_error', message: 'Overloaded' },
    });
    const { ctx, deltas } = makeCtx();
    const err = await provider.call(request(), ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelRetryableError);
    expect((err as ModelRetryableError).message).toContain('overloaded_error');
    expect(deltas.length).toBe(1);
  });

  it('honours retry-after-ms, and retry-after given as an HTTP date', async () => {
    fake.enqueue(
      {
        kind: 'status',
        status: 429,
        errorType: 'rate_limit_error',
        message: 'slow down',
        headers: { 'retry-after-ms': '1500', 'retry-after': '2' },
      },
      {
        kind: 'status',
        status: 503,
        errorType: 'api_error',
        message: 'unavailable',
        headers: { 'retry-after': new Date(Date.now() + 5000).toUTCString() },
      },
    );
    const first = await provider.call(request(), makeCtx().ctx).catch((e: unknown) => e);
    expect((first as ModelRetryableError).retryAfterMs).toBe(1500);
    const second = await provider.call(request(), makeCtx().ctx).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(ModelRetryableError);
    // HTTP dates have one-second resolution, so "in five seconds" lands between four and five.
    expect((second as ModelRetryableError).retryAfterMs).toBeGreaterThan(3000);
    expect((second as ModelRetryableError).retryAfterMs).toBeLessThanOrEqual(5000);
  });

  it.each([500, 502, 503, 504])('maps %i to ModelRetryableError', async (status) => {
    fake.enqueue({ kind: 'status', status, errorType: 'api_error', message: 'Internal server error' });
    await expect(provider.call(request(), makeCtx().ctx)).rejects.toBeInstanceOf(ModelRetryableError);
  });

  it.each([
    [401, 'authentication_error'],
    [403, 'permission_error'],
    [404, 'not_found_error'],
    [413, 'request_too_large'],
    [422, 'invalid_request_error'],
  ])('maps %i %s to ModelRequestError', async (status, errorType) => {
    fake.enqueue({ kind: 'status', status, errorType, message: `fake ${errorType}` });
    const err = await provider.call(request(), makeCtx().ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelRequestError);
    expect((err as ModelRequestError).status).toBe(status);
    expect((err as ModelRequestError).message).toContain(`fake ${errorType}`);
  });

  it('maps 400 invalid_request_error to ModelRequestError with the API message and status', async () => {
    fake.enqueue({
      kind: 'status',
      status: 400,
      errorType: 'invalid_request_error',
      message: 'messages: roles must alternate',
    });
    const err = await provider.call(request(), makeCtx().ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelRequestError);
    expect((err as ModelRequestError).status).toBe(400);
    expect((err as ModelRequestError).message).toContain('messages: roles must alternate');
    expect((err as ModelRequestError).message).toContain('invalid_request_error');
  });

  it('rejects, without mapping to a provider error, when the signal aborts mid-stream', async () => {
    fake.enqueue({
      kind: 'stream',
      text: 'a long answer that the user interrupts halfway through',
      delayMsBetweenEvents: 100,
    });
    const { ctx, deltas, controller } = makeCtx((_delta, c) => c.abort());

    const err = await provider.call(request(), ctx).catch((e: unknown) => e);

    expect(controller.signal.aborted).toBe(true);
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(ModelRetryableError);
    expect(err).not.toBeInstanceOf(ModelRequestError);
    expect((err as Error).name).toMatch(/Abort/);
    expect(deltas).toHaveLength(1);
  });
});
