import { createHmac } from 'node:crypto';
import type { Delivery, SendResult } from '../../domain/delivery';
import type { OutboundMessage, Transport } from './transport';

type WebhookDelivery = Extract<Delivery, { channel: 'webhook' }>;

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * The `x-keel-signature` value for a body: `v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`.
 * The timestamp is signed too so a receiver can reject replays of an old, captured request.
 * Exported so receivers (and tests) verify with exactly the code that signs.
 */
export function signWebhookBody(secret: string, timestamp: string, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** Statuses that say "try again later" rather than "this request is wrong". */
function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

/** POSTs the reply as JSON to the target URL, signed when the target has a secret. One attempt per call. */
export function webhookTransport(opts: { timeoutMs?: number } = {}): Transport<WebhookDelivery> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  return {
    channel: 'webhook',
    async send(target: WebhookDelivery, message: OutboundMessage, signal: AbortSignal): Promise<SendResult> {
      signal.throwIfAborted();
      // The schema already checks the URL, but a URL fetch cannot parse will never work: don't retry it.
      if (!URL.canParse(target.url)) return { ok: false, retryable: false, reason: 'invalid_url' };

      const raw = JSON.stringify({
        agentId: message.agentId,
        conversationId: message.conversationId,
        turnId: message.turnId,
        text: message.text,
        idempotencyKey: message.idempotencyKey,
      });
      const timestamp = String(Math.floor(Date.now() / 1000));
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        // Retries reuse the key, so the receiver can drop duplicates of an effect it already applied.
        'idempotency-key': message.idempotencyKey,
        'x-keel-timestamp': timestamp,
      };
      if (target.secret !== undefined) headers['x-keel-signature'] = signWebhookBody(target.secret, timestamp, raw);

      const timeout = AbortSignal.timeout(timeoutMs);
      let response: Response;
      try {
        response = await fetch(target.url, {
          method: 'POST',
          headers,
          body: raw,
          signal: AbortSignal.any([signal, timeout]),
          // A redirect is answered as a failure rather than followed: following would re-send the signed
          // body to a host the owner did not configure.
          redirect: 'manual',
        });
      } catch {
        // Cancellation is not a delivery failure: let it propagate so the activity ends as cancelled.
        if (signal.aborted) signal.throwIfAborted();
        if (timeout.aborted) return { ok: false, retryable: true, reason: 'timeout' };
        return { ok: false, retryable: true, reason: 'network' };
      }
      // Only the status matters; release the connection instead of reading a body nobody looks at.
      await response.body?.cancel().catch(() => undefined);

      const { status } = response;
      if (status >= 200 && status < 300) return { ok: true, detail: `http_${status}` };
      return { ok: false, retryable: isRetryableStatus(status), reason: `http_${status}` };
    },
  };
}
