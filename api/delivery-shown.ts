import { z } from 'zod';
import type { Delivery } from '../domain/delivery';
import { shownSecretFingerprint } from '../services/delivery-secrets';

/**
 * A Delivery as every answer shows it: a webhook's secret becomes `hasSecret` and the first 8 hex characters of its
 * SHA-256 (which one it is, never the value). What a person sets, a person can tell apart, and nothing more.
 */
export const DeliveryShown = z.discriminatedUnion('channel', [
  z.object({ channel: z.literal('none') }),
  z.object({
    channel: z.literal('webhook'),
    url: z.string(),
    hasSecret: z.boolean(),
    secretFingerprint: z.string().optional().describe('The first 8 hex characters of the secret’s SHA-256'),
  }),
  z.object({ channel: z.literal('slack'), target: z.string() }),
]);
export type DeliveryShown = z.infer<typeof DeliveryShown>;

export function shownDelivery(d: Delivery): DeliveryShown {
  if (d.channel !== 'webhook') return d;
  return d.secret === undefined
    ? { channel: 'webhook', url: d.url, hasSecret: false }
    : { channel: 'webhook', url: d.url, hasSecret: true, secretFingerprint: shownSecretFingerprint(d.secret) };
}

/** Each destination shown. */
export const shownDestinations = (d: Record<string, Delivery>) =>
  Object.fromEntries(Object.entries(d).map(([name, delivery]) => [name, shownDelivery(delivery)]));
