import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody } from './http';

/**
 * A local stand-in for the Anthropic Messages API (`POST /v1/messages`), answering queued answers in order with
 * the documented JSON and SSE shapes, so the real SDK can be tested against it without a network or a key.
 */

export type FakeUsage = Partial<{
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
}>;

export type FakeAnswer =
  | {
      kind: 'stream';
      text?: string;
      toolUse?: { name: string; input: Record<string, unknown> };
      stopReason?: string;
      usage?: FakeUsage;
      /** Pause between SSE events, so a test can act mid-stream (e.g. abort after the first delta). */
      delayMsBetweenEvents?: number;
      /** Send an SSE `error` event after the first content delta instead of finishing (e.g. overloaded_error). */
      midStreamError?: { errorType: string; message: string };
    }
  | { kind: 'status'; status: number; errorType: string; message: string; headers?: Record<string, string> };

export interface FakeRequest {
  at: number;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
}

export interface FakeAnthropic {
  /** Base URL for the SDK's `baseURL` option. */
  url: string;
  requests: FakeRequest[];
  enqueue(...answers: FakeAnswer[]): void;
  close(): Promise<void>;
}

const DEFAULT_ANSWER: FakeAnswer = { kind: 'stream', text: 'fake: ok', stopReason: 'end_turn' };

export async function startFakeAnthropic(): Promise<FakeAnthropic> {
  const queue: FakeAnswer[] = [];
  const requests: FakeRequest[] = [];
  let counter = 0;

  const server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, 500, 'api_error', err instanceof Error ? err.message : String(err));
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    let body: unknown = raw;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      // Recorded as the raw text; answered below as the API would.
    }
    requests.push({ at: Date.now(), body, headers: { ...req.headers } });

    if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/messages')
      return sendError(res, 404, 'not_found_error', `Not found: ${req.method} ${req.url}`);
    if (!req.headers['x-api-key'] && !req.headers.authorization)
      return sendError(res, 401, 'authentication_error', 'x-api-key header is required');
    if (!req.headers['anthropic-version'])
      return sendError(res, 400, 'invalid_request_error', 'anthropic-version: header is required');
    if (!isRecord(body)) return sendError(res, 400, 'invalid_request_error', 'Request body must be a JSON object');

    const answer = queue.shift() ?? DEFAULT_ANSWER;
    if (answer.kind === 'status')
      return sendError(res, answer.status, answer.errorType, answer.message, answer.headers);

    const n = ++counter;
    const model = typeof body.model === 'string' ? body.model : 'claude-fake';
    if (body.stream === true) await sendStream(res, answer, n, model);
    else sendJson(res, 200, fullMessage(answer, n, model));
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    enqueue: (...answers) => void queue.push(...answers),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // The SDK's fetch keeps connections alive; without this, close() waits for them to time out.
        server.closeAllConnections();
      }),
  };
}

type StreamAnswer = Extract<FakeAnswer, { kind: 'stream' }>;

function usageOf(answer: StreamAnswer) {
  return {
    input_tokens: answer.usage?.input_tokens ?? 10,
    output_tokens: answer.usage?.output_tokens ?? 5,
    cache_creation_input_tokens: answer.usage?.cache_creation_input_tokens ?? 0,
    cache_read_input_tokens: answer.usage?.cache_read_input_tokens ?? 0,
  };
}

function stopReasonOf(answer: StreamAnswer): string {
  return answer.stopReason ?? (answer.toolUse ? 'tool_use' : 'end_turn');
}

function messageShell(n: number, model: string) {
  return {
    id: `msg_fake_${n}`,
    type: 'message',
    role: 'assistant',
    model,
    content: [] as unknown[],
    stop_reason: null as string | null,
    stop_sequence: null,
  };
}

function fullMessage(answer: StreamAnswer, n: number, model: string) {
  const content: unknown[] = [];
  if (answer.text) content.push({ type: 'text', text: answer.text });
  if (answer.toolUse)
    content.push({ type: 'tool_use', id: `toolu_fake_${n}`, name: answer.toolUse.name, input: answer.toolUse.input });
  return { ...messageShell(n, model), content, stop_reason: stopReasonOf(answer), usage: usageOf(answer) };
}

/** The documented event sequence: message_start, ping, per block start/deltas/stop, message_delta, message_stop. */
function streamEvents(answer: StreamAnswer, n: number, model: string): { event: string; data: unknown }[] {
  const usage = usageOf(answer);
  const events: { event: string; data: unknown }[] = [
    {
      event: 'message_start',
      data: { type: 'message_start', message: { ...messageShell(n, model), usage: { ...usage, output_tokens: 1 } } },
    },
    { event: 'ping', data: { type: 'ping' } },
  ];
  let index = 0;
  if (answer.text) {
    events.push({
      event: 'content_block_start',
      data: { type: 'content_block_start', index, content_block: { type: 'text', text: '' } },
    });
    for (const chunk of splitText(answer.text, 3)) {
      events.push({
        event: 'content_block_delta',
        data: { type: 'content_block_delta', index, delta: { type: 'text_delta', text: chunk } },
      });
    }
    events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } });
    index++;
  }
  if (answer.toolUse) {
    const { name, input } = answer.toolUse;
    events.push({
      event: 'content_block_start',
      data: {
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: `toolu_fake_${n}`, name, input: {} },
      },
    });
    for (const chunk of splitText(JSON.stringify(input), 2)) {
      events.push({
        event: 'content_block_delta',
        data: { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: chunk } },
      });
    }
    events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } });
  }
  if (answer.midStreamError) {
    const firstDelta = events.findIndex((e) => e.event === 'content_block_delta');
    const { errorType, message } = answer.midStreamError;
    return [
      ...events.slice(0, firstDelta + 1),
      { event: 'error', data: { type: 'error', error: { type: errorType, message } } },
    ];
  }
  events.push(
    {
      event: 'message_delta',
      data: {
        type: 'message_delta',
        delta: { stop_reason: stopReasonOf(answer), stop_sequence: null },
        usage: { output_tokens: usage.output_tokens },
      },
    },
    { event: 'message_stop', data: { type: 'message_stop' } },
  );
  return events;
}

async function sendStream(res: ServerResponse, answer: StreamAnswer, n: number, model: string): Promise<void> {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    'request-id': `req_fake_${n}`,
  });
  let closed = false;
  res.on('close', () => (closed = true));
  const delay = answer.delayMsBetweenEvents ?? 0;
  for (const [i, { event, data }] of streamEvents(answer, n, model).entries()) {
    if (closed) return; // the client went away (aborted): stop, as the real server does
    if (i > 0 && delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    if (closed) return;
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }
  res.end();
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'request-id': 'req_fake', ...headers });
  res.end(JSON.stringify(body));
}

function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  headers?: Record<string, string>,
): void {
  sendJson(res, status, { type: 'error', error: { type, message } }, headers);
}

/** Splits into at most `parts` non-empty pieces, on code points so no character is cut in half. */
function splitText(text: string, parts: number): string[] {
  const chars = Array.from(text);
  const size = Math.max(1, Math.ceil(chars.length / parts));
  const chunks: string[] = [];
  for (let i = 0; i < chars.length; i += size) chunks.push(chars.slice(i, i + size).join(''));
  return chunks;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
