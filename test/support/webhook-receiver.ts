import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { readBody } from './http';

export interface ReceivedWebhook {
  path: string;
  headers: IncomingHttpHeaders;
  /** The JSON body, or undefined when it did not parse. */
  body: unknown;
  raw: string;
  /** Standard Webhooks verification with the receiver's secret; undefined when the receiver has no secret. */
  validSignature: boolean | undefined;
  /** Why verification failed (the library's message), when it did. */
  verifyError?: string;
  /** The status this receiver answered with: failStatus for the first `failFirst` requests, 401 when refused. */
  status: number;
}

export interface WebhookReceiver {
  url: string;
  /** Every request, in arrival order, including those answered with failStatus. */
  received: ReceivedWebhook[];
  /** Accepted (2xx) requests per idempotency-key header: more than 1 means a duplicate delivery got through. */
  byIdempotencyKey(): Map<string, number>;
  /** Resolves once `predicate(received)` holds; rejects after timeoutMs or on close. */
  waitFor(predicate: (received: ReceivedWebhook[]) => boolean, timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return undefined;
  }
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Verifies as a receiver would, with the `standardwebhooks` library and nothing of Keel's: a `whsec_` secret as it
 * is, a plain one as its raw bytes (the library's `format: 'raw'`, which is UTF-8 for the ASCII secrets tests use).
 * The library checks the signature in constant time and the timestamp against a 5-minute tolerance.
 */
function verify(secret: string, headers: IncomingHttpHeaders, raw: string): { valid: boolean; error?: string } {
  const wh = secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' });
  const flat: Record<string, string> = {};
  for (const name of Object.keys(headers)) {
    const value = header(headers, name);
    if (value !== undefined) flat[name] = value;
  }
  try {
    wh.verify(raw, flat);
    return { valid: true };
  } catch (err) {
    return { valid: false, error: err instanceof Error ? err.message : String(err) };
  }
}

/** A local HTTP endpoint that records webhook deliveries, on 127.0.0.1 and a free port. */
export async function startWebhookReceiver(
  opts: {
    secret?: string;
    failFirst?: number;
    failStatus?: number;
    /** Answer 401 to a request that fails verification, as a receiver that checks signatures would. */
    rejectUnverified?: boolean;
  } = {},
): Promise<WebhookReceiver> {
  const failFirst = opts.failFirst ?? 0;
  const failStatus = opts.failStatus ?? 503;
  const received: ReceivedWebhook[] = [];
  // Waiters are re-checked on every arrival, so waitFor resolves on the event rather than by polling.
  const waiters = new Set<{ check: () => void; fail: (err: Error) => void }>();
  let requests = 0;

  const server = createServer((req, res) => {
    readBody(req).then(
      (raw) => {
        requests += 1;
        const verified = opts.secret === undefined ? undefined : verify(opts.secret, req.headers, raw);
        const refuse = opts.rejectUnverified === true && verified?.valid === false;
        const status = requests <= failFirst ? failStatus : refuse ? 401 : 200;
        received.push({
          path: req.url ?? '/',
          headers: req.headers,
          body: parseJson(raw),
          raw,
          validSignature: verified?.valid,
          ...(verified?.error === undefined ? {} : { verifyError: verified.error }),
          status,
        });
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ok: status < 300 }));
        for (const waiter of waiters) waiter.check();
      },
      () => {
        res.writeHead(400).end();
      },
    );
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    byIdempotencyKey() {
      const counts = new Map<string, number>();
      for (const r of received) {
        const key = header(r.headers, 'idempotency-key');
        if (key === undefined || r.status < 200 || r.status >= 300) continue;
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      return counts;
    },
    waitFor(predicate, timeoutMs) {
      return new Promise<void>((resolve, reject) => {
        const waiter = {
          check: () => {
            if (!predicate(received)) return;
            done();
            resolve();
          },
          fail: (err: Error) => {
            done();
            reject(err);
          },
        };
        const timer = setTimeout(
          () =>
            waiter.fail(
              new Error(`webhook receiver: condition not met within ${timeoutMs} ms (${received.length} received)`),
            ),
          timeoutMs,
        );
        const done = () => {
          clearTimeout(timer);
          waiters.delete(waiter);
        };
        waiters.add(waiter);
        waiter.check();
      });
    },
    close() {
      for (const waiter of waiters) waiter.fail(new Error('webhook receiver closed'));
      return new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // fetch keeps connections alive; without this close() would wait for them to idle out.
        server.closeAllConnections();
      });
    },
  };
}
