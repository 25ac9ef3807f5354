import { z } from 'zod';
import { storableString } from './text';
import type { SecretRules } from './secret-scan';
import { WEBHOOK_SECRET_MESSAGE, WEBHOOK_SECRET_PATTERN } from './webhook-secret';
import type { DeliveryOutcome } from './delivery-outcome';
export { outcomeKind, type DeliveryOutcome } from './delivery-outcome';

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
    .object({
      channel: z.literal('webhook'),
      url: httpUrl,
      secret: storableString().min(1).max(512).regex(WEBHOOK_SECRET_PATTERN, WEBHOOK_SECRET_MESSAGE).optional(),
    })
    .strict(),
  z.object({ channel: z.literal('slack'), target: SlackTarget }).strict(),
]);
export type Delivery = z.infer<typeof Delivery>;

export const NO_DELIVERY: Delivery = { channel: 'none' };

/** The name the agent's owner delivery goes by: a destination too, configured as `owner.delivery`. */
export const OWNER_DESTINATION = 'owner';
export const MAX_DESTINATIONS = 50;

/** A destination's name: what the model may write where a person would write a Delivery. */
export const DESTINATION_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const DESTINATION_NAME_RULE = 'a destination name is 1–64 letters, digits, ".", "_" or "-"';
export const DestinationName = z.string().regex(DESTINATION_NAME, DESTINATION_NAME_RULE);

const OWNER_RESERVED = `"${OWNER_DESTINATION}" names the owner delivery: set it as owner.delivery`;

/** The destinations a person configures for an agent, by name (`owner` is reserved for the owner delivery). */
export const Destinations = z
  .record(z.string(), Delivery)
  .superRefine((d, ctx) => {
    const names = Object.keys(d);
    if (names.length > MAX_DESTINATIONS)
      ctx.addIssue({ code: 'custom', message: `an agent may have at most ${MAX_DESTINATIONS} destinations` });
    for (const name of names) {
      if (!DESTINATION_NAME.test(name))
        ctx.addIssue({ code: 'custom', path: [name], message: `"${name}": ${DESTINATION_NAME_RULE}` });
      else if (name.toLowerCase() === OWNER_DESTINATION)
        ctx.addIssue({ code: 'custom', path: [name], message: OWNER_RESERVED });
    }
  })
  // The same rules for the OpenAPI document (a refinement is invisible there; JSON Schema patterns take no flags).
  .meta({
    maxProperties: MAX_DESTINATIONS,
    propertyNames: { pattern: DESTINATION_NAME.source, not: { pattern: '^[Oo][Ww][Nn][Ee][Rr]$' } },
  });
export type Destinations = z.infer<typeof Destinations>;

/** What an agent's configuration offers to whoever names a destination. */
export interface DestinationBook {
  destinations: Destinations;
  ownerDelivery: Delivery | null;
}

/** The names that can be given: the configured destinations, and `owner` once an owner delivery is set. */
export function destinationNames(book: DestinationBook): string[] {
  return [...Object.keys(book.destinations).sort(), ...(book.ownerDelivery ? [OWNER_DESTINATION] : [])];
}

export function resolveDestination(book: DestinationBook, name: string): Delivery | undefined {
  if (name === OWNER_DESTINATION) return book.ownerDelivery ?? undefined;
  return Object.hasOwn(book.destinations, name) ? book.destinations[name] : undefined;
}

/** Why a name is not one of the book's, in words the model reads (it lists the names it may use). */
export function unknownDestination(book: DestinationBook, name: string): string {
  const names = destinationNames(book);
  const known = names.length ? `its destinations: ${names.join(', ')}` : 'it has none: a person configures them';
  return `this agent has no destination named "${name}" (${known})`;
}

/**
 * Said to the model that gave a URL or a Slack target where only a destination's name is taken: where data goes is a
 * person's choice (an instruction in a message or a tool result must not be able to send it elsewhere).
 */
export const MODEL_TARGET_REFUSED =
  'the model may only name a destination that a person configured for this agent, never give a URL or a Slack ' +
  'target; leave delivery out to keep the results in Keel, or ask the owner to configure a destination';

export interface DeliverReplyInput {
  conversationKey: string;
  agentId: string;
  conversationId: string;
  turnId: string;
  /** The transcript row of the reply (its text becomes readable through the API whatever the delivery does). */
  replySeq: number;
  text: string;
  /** Idempotency key: the same on every retry and replay of this delivery. */
  effectKey: string;
  /** The reply guard's rules, checked in this step before anything is written or sent (GUARD_IN_DELIVERY_PATCH). */
  guard?: SecretRules;
}

/** A reply the guard blocked in its delivery's step: what the model reads, and why, for the turn's error. */
export interface ReplyBlocked {
  blocked: { message: string; detail: string };
}

export interface DeliveryReport {
  outcome: DeliveryOutcome;
  attempts: number;
}

/** What a transport reports for one attempt. Retryable failures are retried by Temporal with the delivery policy. */
export type SendResult = { ok: true; detail?: string } | { ok: false; retryable: boolean; reason: string };
