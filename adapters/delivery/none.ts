import type { Delivery, SendResult } from '../../domain/delivery';
import type { Transport } from './transport';

type NoneDelivery = Extract<Delivery, { channel: 'none' }>;

/**
 * The transport for agents with no delivery channel. The reply is already stored in PostgreSQL and readable
 * through the API, so nothing is sent; the non-retryable result tells the caller to record `skipped:channel_none`.
 */
export function noneTransport(): Transport<NoneDelivery> {
  return {
    channel: 'none',
    send(): Promise<SendResult> {
      return Promise.resolve({ ok: false, retryable: false, reason: 'channel_none' });
    },
  };
}
