/** A REST client that keeps trying through the soak's faults, and remembers what each try got. */

export interface CallResult {
  /** The final HTTP status, or 0 when the last try never got an answer (deadline reached). */
  status: number;
  body: unknown;
  /** One entry per try: an HTTP status, or `network` (refused, reset, timed out). */
  tries: (number | 'network')[];
}

/** Statuses that mean "Keel (or a part under it) is down for a moment": 5xx, 408 and 429. */
export function isTransient(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The APIs the soak talks to, taken in turn: every try of every call goes to the next one, so the load spreads over
 * all of them and a retry after a killed API's failure lands on another. Counts the requests in flight to each, so a
 * fault can kill an API while it is serving some.
 */
export class ApiRing {
  private turn = 0;
  private readonly inFlight = new Map<string, number>();
  private readonly started = new Set<(api: string) => void>();

  constructor(readonly apis: readonly string[]) {
    if (apis.length === 0) throw new Error('ApiRing: no API');
  }

  next(): string {
    return this.apis[this.turn++ % this.apis.length]!;
  }

  inFlightTo(api: string): number {
    return this.inFlight.get(api) ?? 0;
  }

  /** Resolves true when the next request to `api` starts, false if none has within `timeoutMs`. */
  nextRequestTo(api: string, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const done = (started: boolean) => {
        clearTimeout(timer);
        this.started.delete(listener);
        resolve(started);
      };
      const listener = (to: string) => {
        if (to === api) done(true);
      };
      const timer = setTimeout(() => done(false), Math.max(0, timeoutMs));
      this.started.add(listener);
    });
  }

  async request<T>(api: string, send: () => Promise<T>): Promise<T> {
    this.inFlight.set(api, this.inFlightTo(api) + 1);
    for (const listener of [...this.started]) listener(api);
    try {
      return await send();
    } finally {
      this.inFlight.set(api, this.inFlightTo(api) - 1);
    }
  }
}

/**
 * One API call (`path` from /v1 on), retried on network errors and transient statuses until `deadline` (epoch ms),
 * each try on the ring's next API. Only safe for calls that are idempotent or whose repeat is recognised (a
 * message's messageId, a job's unique name, pause of a paused job).
 */
export async function callWithRetry(
  ring: ApiRing,
  path: string,
  init: { method: string; body?: unknown },
  deadline: number,
): Promise<CallResult> {
  const tries: CallResult['tries'] = [];
  for (let attempt = 0; ; attempt++) {
    try {
      const api = ring.next();
      // The body is read inside the count: a response's headers can arrive before an API dies mid-body.
      const { res, text } = await ring.request(api, async () => {
        const r = await fetch(`${api}${path}`, {
          method: init.method,
          // No content type without a body: fastify refuses an empty JSON body.
          headers: init.body === undefined ? {} : { 'content-type': 'application/json' },
          body: init.body === undefined ? undefined : JSON.stringify(init.body),
          // Longer than the API's own 15 s deadline on Temporal, so the API's 503 arrives rather than our timeout.
          signal: AbortSignal.timeout(30_000),
        });
        return { res: r, text: await r.text() };
      });
      tries.push(res.status);
      const body = parseJson(text);
      if (!isTransient(res.status) || Date.now() >= deadline) return { status: res.status, body, tries };
    } catch {
      tries.push('network');
      if (Date.now() >= deadline) return { status: 0, body: undefined, tries };
    }
    // Backoff up to 3 s: a worker restart takes a few seconds, a Temporal restart some more.
    await sleep(Math.min(3_000, 500 * 2 ** Math.min(attempt, 3)));
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
