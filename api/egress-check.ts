import type { Delivery } from '../domain/delivery';
import { staticEgressCheck, type EgressAllow } from '../domain/egress';
import { ApiError } from './errors';

/**
 * A configured webhook that can never pass the egress guard (its host is a refused address, or a name that always
 * means this machine) is refused now with a 400 naming the rule, rather than dropped at every delivery.
 */
export function assertReachable(
  deliveries: readonly (readonly [field: string, Delivery | undefined])[],
  allow: EgressAllow,
): void {
  for (const [field, delivery] of deliveries) {
    if (delivery?.channel !== 'webhook') continue;
    const refusal = staticEgressCheck(delivery.url, allow);
    if (refusal) {
      const details = { field, addressClass: refusal.addressClass };
      throw new ApiError(400, 'egress_refused', `${field}: ${refusal.message}`, details);
    }
  }
}
