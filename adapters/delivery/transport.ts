import type { Delivery, SendResult } from '../../domain/delivery';

/** What is sent: the reply and where it comes from. `idempotencyKey` is the effect's key in the ledger. */
export interface OutboundMessage {
  agentId: string;
  conversationId: string | null;
  turnId: string | null;
  text: string;
  idempotencyKey: string;
}

/**
 * A delivery transport sends one message to one target, once per call, and says whether a failure is worth
 * retrying. It never retries by itself: the delivery activity's Temporal retry policy does.
 */
export interface Transport<D extends Delivery = Delivery> {
  readonly channel: D['channel'];
  send(target: D, message: OutboundMessage, signal: AbortSignal): Promise<SendResult>;
}

/** One transport per delivery channel. */
export type Transports = { [C in Delivery['channel']]: Transport<Extract<Delivery, { channel: C }>> };
