import type { Delivery } from './api-types';

/** Where something would be sent, in words (a delivery as docs/api.md shows it, without its secret). */
export function describeDelivery(d: Delivery): string {
  switch (d.channel) {
    case 'webhook':
      return `webhook ${d.url}`;
    case 'slack':
      return `Slack ${d.target}`;
    case 'none':
      return 'nowhere (channel none)';
  }
}
