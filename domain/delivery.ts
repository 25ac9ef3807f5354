import { z } from 'zod';
import { storableString } from './text';

// A regex rather than z.url(): this schema also runs inside the workflow sandbox, which has no URL parser to rely on.
const httpUrl = storableString()
  .max(2048)
  .regex(/^https?:\/\/[^\s/?#@]+(?::\d{1,5})?(?:[/?#]\S*)?$/i, 'must be an absolute http(s) URL');

/** Where a reply goes. `owner` is the agent's owner; `C…` a Slack channel; `U…` a Slack user. */
export const SlackTarget = z.union([
  z.literal('owner'),
  z.string().regex(/^[CU][A-Z0-9]{2,}$/, 'must be owner, C… or U…'),
]);

export const Delivery = z.discriminatedUnion('channel', [
  z.object({ channel: z.literal('none') }).strict(),
  z
    .object({ channel: z.literal('webhook'), url: httpUrl, secret: storableString().min(1).max(512).optional() })
    .strict(),
  z.object({ channel: z.literal('slack'), target: SlackTarget }).strict(),
]);
export type Delivery = z.infer<typeof Delivery>;

export const NO_DELIVERY: Delivery = { channel: 'none' };

/**
 * Outcome of one delivery: `delivered`, or a kind with its reason. `skipped` means Keel chose not to send
 * (nothing to send to); `dropped` means the target refused it for good; `error` means retries ran out.
 */
export type DeliveryOutcome = 'delivered' | `skipped:${string}` | `dropped:${string}` | `error:${string}`;

export function outcomeKind(outcome: DeliveryOutcome): 'delivered' | 'skipped' | 'dropped' | 'error' {
  return outcome === 'delivered' ? 'delivered' : (outcome.split(':')[0] as 'skipped' | 'dropped' | 'error');
}

/** What a transport reports for one attempt. Retryable failures are retried by Temporal with the delivery policy. */
export type SendResult = { ok: true; detail?: string } | { ok: false; retryable: boolean; reason: string };
