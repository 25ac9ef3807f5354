import type { Transports } from '../adapters/delivery/transport';
import type { Pool } from '../db/pool';
import type { FinalReplyInput } from '../domain/conversation';
import type { DeliverReplyInput, DeliveryReport, ReplyBlocked } from '../domain/delivery';
import { deliverReply, replyBlocked } from '../services/delivery';
import { deliverFinalReply } from '../services/final-reply';
import { currentStep } from '../services/step';

export function deliveryActivities({ pool, transports }: { pool: Pool; transports: Transports }) {
  return {
    /** Sends a turn's reply once, through the effects ledger, unless the guard blocks it. */
    deliverReply: async (input: DeliverReplyInput): Promise<DeliveryReport | ReplyBlocked> =>
      replyBlocked(input) ?? deliverReply(pool, transports, input, currentStep()),
    /** Sends a reply that ends its turn once, and commits the turn's end, unless the guard blocks it. */
    deliverFinalReply: async (input: FinalReplyInput): Promise<DeliveryReport | ReplyBlocked> =>
      replyBlocked(input) ?? deliverFinalReply(pool, transports, input, currentStep()),
  };
}
