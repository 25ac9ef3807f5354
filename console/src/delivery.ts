/** Where something would be sent, in words: a Delivery of the API (docs/api.md), or a destination's name. */
export type Delivery =
  | { channel: 'none' }
  | { channel: 'webhook'; url: string; hasSecret?: boolean; secretFingerprint?: string }
  | { channel: 'slack'; target: string }
  | string;

export function describeDelivery(d: Delivery | Record<string, unknown>): string {
  if (typeof d === 'string') return `destination ${d}`;
  switch (d.channel) {
    case 'webhook':
      return `webhook ${String(d.url)}`;
    case 'slack':
      return `Slack ${String(d.target)}`;
    case 'none':
      return 'nowhere (channel none)';
    default:
      return JSON.stringify(d);
  }
}
