import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody } from './http';

export interface FakeSlackCall {
  /** The Web API method, e.g. `chat.postMessage`. */
  method: string;
  /** Arguments as sent: the SDK form-encodes them (application/x-www-form-urlencoded); JSON is accepted too. */
  body: Record<string, unknown>;
  /** The Authorization header, e.g. `Bearer xoxb-…`; undefined when absent. */
  auth: string | undefined;
}

/** One scripted answer: a success, a platform error (HTTP 200, ok:false), or a bare HTTP status. */
export type FakeSlackAnswer = { ok: true } | { ok: false; error: string } | { status: number; retryAfter?: number };

export interface FakeSlack {
  /** Base URL for the SDK's slackApiUrl, ending with '/api/'. */
  url: string;
  calls: FakeSlackCall[];
  /** Scripts the answers to the next calls, in order; once used up, calls get the default success. */
  enqueue(...answers: FakeSlackAnswer[]): void;
  close(): Promise<void>;
}

function parseBody(contentType: string | undefined, raw: string): Record<string, unknown> {
  if (contentType?.startsWith('application/json')) {
    try {
      const parsed: unknown = JSON.parse(raw);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed))
        return parsed as Record<string, unknown>;
    } catch {
      // Fall through: an unparsable body is recorded as empty, and the call then fails like Slack's would.
    }
    return {};
  }
  return Object.fromEntries(new URLSearchParams(raw));
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
  res.end(JSON.stringify(body));
}

/** A local stand-in for https://slack.com/api/ that records calls and answers as scripted. */
export async function startFakeSlack(opts: { ts?: string } = {}): Promise<FakeSlack> {
  const ts = opts.ts ?? '1700000000.000100';
  const calls: FakeSlackCall[] = [];
  const queue: FakeSlackAnswer[] = [];

  const answer = (res: ServerResponse, call: FakeSlackCall): void => {
    const scripted = queue.shift();
    if (scripted !== undefined && 'status' in scripted) {
      const headers: Record<string, string> =
        scripted.retryAfter === undefined ? {} : { 'retry-after': String(scripted.retryAfter) };
      json(res, scripted.status, { ok: false, error: `http_${scripted.status}` }, headers);
      return;
    }
    if (scripted !== undefined && !scripted.ok) {
      json(res, 200, { ok: false, error: scripted.error });
      return;
    }
    if (call.auth === undefined) {
      json(res, 200, { ok: false, error: 'not_authed' });
      return;
    }
    if (call.method !== 'chat.postMessage') {
      json(res, 200, { ok: false, error: 'unknown_method' });
      return;
    }
    json(res, 200, { ok: true, channel: call.body.channel, ts, message: { text: call.body.text, ts } });
  };

  const server = createServer((req, res) => {
    const match = /^\/api\/([A-Za-z0-9_.]+)$/.exec(req.url?.split('?')[0] ?? '');
    if (req.method !== 'POST' || match?.[1] === undefined) {
      json(res, 404, { ok: false, error: 'not_found' });
      return;
    }
    const method = match[1];
    readBody(req).then(
      (raw) => {
        const call: FakeSlackCall = {
          method,
          body: parseBody(req.headers['content-type'], raw),
          auth: req.headers.authorization,
        };
        calls.push(call);
        answer(res, call);
      },
      () => json(res, 400, { ok: false, error: 'bad_request' }),
    );
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/api/`,
    calls,
    enqueue(...answers) {
      queue.push(...answers);
    },
    close() {
      return new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // The SDK's fetch keeps connections alive; without this close() would wait for them to idle out.
        server.closeAllConnections();
      });
    },
  };
}
