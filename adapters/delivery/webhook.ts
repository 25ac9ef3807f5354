import { Webhook } from 'standardwebhooks';
import type { Delivery, SendResult } from '../../domain/delivery';
import { WHSEC_PREFIX } from '../../domain/webhook-secret';
import { egressFailureOf, type EgressGuard } from '../egress';
import type { OutboundMessage, Transport } from './transport';

type WebhookDelivery = Extract<Delivery, { channel: 'webhook' }>;

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * The Standard Webhooks secret a Delivery's `secret` stands for, which is what a receiver gives its library: a
 * `whsec_<base64>` secret is itself; a plain one (accepted before signatures followed the spec) signs with its UTF-8
 * bytes, which is the key `whsec_` + their base64 names.
 */
export function standardWebhookSecret(secret: string): string {
  return secret.startsWith(WHSEC_PREFIX) ? secret : WHSEC_PREFIX + Buffer.from(secret, 'utf8').toString('base64');
}

/**
 * A delivery's `webhook-id`: its idempotency key, the same on every retry, with `%` and `.` percent-encoded
 * (decodeURIComponent gives the key back). The signature covers `<id>.<timestamp>.<body>` and the spec wants no `.` in
 * an id: agent and conversation ids, which API callers choose, may hold one, and it would move where the id ends.
 */
export function webhookId(idempotencyKey: string): string {
  return idempotencyKey.replaceAll('%', '%25').replaceAll('.', '%2E');
}

/**
 * The `webhook-signature` value, `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, made by the spec's
 * reference library, the one receivers verify with. Throws on a `whsec_` secret that does not decode.
 */
export function signStandardWebhook(secret: string, id: string, timestampSeconds: number, body: string): string {
  return new Webhook(standardWebhookSecret(secret)).sign(id, new Date(timestampSeconds * 1000), body);
}

/** Statuses that say "try again later" rather than "this request is wrong". */
function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

/** POSTs the reply as JSON to the target URL, signed when the target has a secret. One attempt per call. */
export function webhookTransport(opts: { timeoutMs?: number; egress: EgressGuard }): Transport<WebhookDelivery> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const { egress } = opts;
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
      const id = webhookId(message.idempotencyKey);
      // Each attempt's own time, signed: a receiver refuses one far from its clock, so a captured request goes stale.
      const timestamp = Math.floor(Date.now() / 1000);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        // Retries reuse the key, so the receiver can drop duplicates of an effect it already applied.
        'idempotency-key': message.idempotencyKey,
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
      };
      if (target.secret !== undefined) {
        try {
          headers['webhook-signature'] = signStandardWebhook(target.secret, id, timestamp, raw);
        } catch {
          // A malformed whsec_ secret stored before the schema refused it: no attempt could ever be signed.
          return { ok: false, retryable: false, reason: 'invalid_secret' };
        }
      }

      const timeout = AbortSignal.timeout(timeoutMs);
      let response: Response;
      try {
        // Through the egress guard, which refuses private and metadata addresses and never follows a redirect
        // (following would re-send the signed body to a host the owner did not configure).
        response = await egress.fetch(target.url, {
          method: 'POST',
          headers,
          body: raw,
          signal: AbortSignal.any([signal, timeout]),
        });
      } catch (err) {
        // Cancellation is not a delivery failure: let it propagate so the activity ends as cancelled.
        if (signal.aborted) signal.throwIfAborted();
        // A refused address or a redirect will be the same on every attempt: dropped, naming why.
        const refused = egressFailureOf(err);
        if (refused) return { ok: false, retryable: false, reason: refused.reason };
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
