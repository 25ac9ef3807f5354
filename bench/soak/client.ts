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
 * One API call, retried on network errors and transient statuses until `deadline` (epoch ms). Only safe for
 * calls that are idempotent or whose repeat is recognised (a message's messageId, a job's unique name, pause of
 * a paused job).
 */
export async function callWithRetry(
  url: string,
  init: { method: string; body?: unknown },
  deadline: number,
): Promise<CallResult> {
  const tries: CallResult['tries'] = [];
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(url, {
        method: init.method,
        // No content type without a body: fastify refuses an empty JSON body.
        headers: init.body === undefined ? {} : { 'content-type': 'application/json' },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        // Longer than the API's own 15 s deadline on Temporal, so the API's 503 arrives rather than our timeout.
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
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
