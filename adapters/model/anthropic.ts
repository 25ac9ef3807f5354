import Anthropic, { APIError, AnthropicError } from '@anthropic-ai/sdk';
import type {
  CacheControlEphemeral,
  Message,
  MessageParam,
  MessageStreamParams,
  TextBlockParam,
  Tool,
} from '@anthropic-ai/sdk/resources/messages/messages';
import {
  ModelRequestError,
  ModelRetryableError,
  type ModelCallContext,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type StopReason,
} from '../../domain/model';
import { egressFailureOf, type EgressGuard } from '../egress';

export interface AnthropicProviderOptions {
  apiKey: string;
  baseURL?: string;
  defaultModel: string;
  /** The egress guard the API calls go through (the base URL is checked like any outbound request). */
  egress: EgressGuard;
}

const EPHEMERAL: CacheControlEphemeral = { type: 'ephemeral' };

/** The Anthropic Messages API, always streamed so text reaches the user as it is written. */
export function createAnthropicProvider(opts: AnthropicProviderOptions): ModelProvider {
  // Temporal owns retries (with backoff, Retry-After and history); an SDK retry inside an attempt would hide them.
  const client = new Anthropic({
    apiKey: opts.apiKey,
    baseURL: opts.baseURL,
    maxRetries: 0,
    fetch: opts.egress.fetch,
  });

  return {
    name: 'anthropic',
    async call(request: ModelRequest, ctx: ModelCallContext): Promise<ModelResponse> {
      const stream = client.messages.stream(toParams(request, opts.defaultModel), { signal: ctx.signal });
      // Heartbeat on every event: a long answer is progress, and heartbeats are how Temporal delivers cancellation.
      stream.on('connect', () => ctx.heartbeat());
      stream.on('streamEvent', () => ctx.heartbeat());
      stream.on('text', (delta) => ctx.onTextDelta(delta));
      let message: Message;
      try {
        message = await stream.finalMessage();
      } catch (err) {
        throw toProviderError(err, ctx.signal);
      }
      return toResponse(message);
    },
  };
}

/** Builds the API request from a copy of ours, with the three cache breakpoints that make repeat turns cheap. */
function toParams(request: ModelRequest, defaultModel: string): MessageStreamParams {
  // The next call repeats this transcript up to the second-to-last message (the last one is the newest
  // user turn or tool result), so that prefix is the one worth writing to the cache.
  const prefixEnd = request.messages.length - 2;
  const messages: MessageParam[] = request.messages.map((m, i) => ({
    role: m.role,
    content: m.content.map((b, j) =>
      i === prefixEnd && j === m.content.length - 1 ? { ...b, cache_control: EPHEMERAL } : { ...b },
    ),
  }));

  const tools: Tool[] = request.tools.map((t, i) => ({
    name: t.name,
    description: t.description,
    // The API requires an object schema; our definitions always are, the SDK's type just says so explicitly.
    input_schema: { ...t.input_schema, type: 'object' },
    ...(i === request.tools.length - 1 ? { cache_control: EPHEMERAL } : {}),
  }));

  // The API rejects empty text blocks, so an empty system prompt is left out rather than sent.
  const system: TextBlockParam[] = request.system
    ? [{ type: 'text', text: request.system, cache_control: EPHEMERAL }]
    : [];

  return {
    model: request.model || defaultModel,
    max_tokens: request.maxTokens,
    messages,
    ...(system.length > 0 ? { system } : {}),
    ...(tools.length > 0 ? { tools } : {}),
  };
}

function toResponse(message: Message): ModelResponse {
  const content: ModelResponse['content'] = [];
  for (const block of message.content) {
    if (block.type === 'text') content.push({ type: 'text', text: block.text });
    else if (block.type === 'tool_use')
      content.push({
        type: 'tool_use',
        id: block.id,
        name: block.name,
        input: isRecord(block.input) ? block.input : {},
      });
    // Other block kinds (thinking, server tools) only appear for features we never request.
  }
  const usage = message.usage;
  return {
    content,
    stopReason: toStopReason(message.stop_reason),
    usage: {
      inputTokens: usage.input_tokens,
      outputTokens: usage.output_tokens,
      cacheReadTokens: usage.cache_read_input_tokens ?? 0,
      cacheWriteTokens: usage.cache_creation_input_tokens ?? 0,
    },
    model: message.model,
  };
}

function toStopReason(reason: Message['stop_reason']): StopReason {
  switch (reason) {
    case 'end_turn':
    case 'tool_use':
    case 'max_tokens':
    case 'stop_sequence':
    case 'pause_turn':
    case 'refusal':
      return reason;
    // Output was cut short for lack of room, which is what max_tokens tells the loop too.
    case 'model_context_window_exceeded':
      return 'max_tokens';
    // A finished stream always carries a stop reason; treat a missing one as a plain end of turn.
    case null:
      return 'end_turn';
  }
}

/** Statuses where the same request may succeed later: rate limits, overload, server trouble, timeouts, conflicts. */
function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

function toProviderError(err: unknown, signal: AbortSignal): unknown {
  // Our own cancellation is not a model failure: the caller must see it as the abort it is.
  if (signal.aborted) return err;
  // A refused address or a redirect fails every attempt alike: a request error, not something to retry.
  const refused = egressFailureOf(err);
  if (refused) return new ModelRequestError(`anthropic: ${refused.message}`);
  if (err instanceof APIError) {
    // `instanceof` leaves the generic parameters as `any`; these are the SDK's own defaults.
    const { status, headers, type, apiMessage, message } = err as APIError<number | undefined, Headers | undefined>;
    const detail = [type, apiMessage ?? message].filter(Boolean).join(': ');
    // No status: a connection failure or timeout, or an `error` event inside an SSE stream (overloaded_error
    // mid-answer).
    if (status === undefined) return new ModelRetryableError(`anthropic: ${detail}`, retryAfterMs(headers));
    if (isRetryableStatus(status))
      return new ModelRetryableError(`anthropic ${status}: ${detail}`, retryAfterMs(headers), status);
    // 400, 401, 403, 404, 413, 422 and the rest of 4xx: the same request will fail the same way.
    return new ModelRequestError(`anthropic ${status}: ${detail}`, status);
  }
  // The SDK wraps a body that broke off mid-stream (socket reset, truncated SSE) as a plain AnthropicError.
  if (err instanceof AnthropicError) return new ModelRetryableError(`anthropic: ${err.message}`);
  return err;
}

/** The server's requested delay: `retry-after-ms`, else `retry-after` in seconds or as an HTTP date. */
function retryAfterMs(headers: Headers | undefined): number | undefined {
  const ms = Number.parseFloat(headers?.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return Math.round(ms);
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
