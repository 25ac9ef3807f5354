import { getAgent } from '../../db/agents';
import type { Pool } from '../../db/pool';
import { deliverOnce, type DeliveryReport, type Transports } from './deliver-reply';

/**
 * A notice to the agent's owner (its owner delivery), sent at most once per key through the effects ledger: a
 * failed job, a spent budget. Skipped when the agent has no owner delivery.
 */
export async function noticeToOwner(
  pool: Pool,
  transports: Transports,
  n: { agentId: string; effectKey: string; text: string },
): Promise<DeliveryReport> {
  const owner = (await getAgent(pool, n.agentId))?.ownerDelivery;
  if (!owner) return { outcome: 'skipped:no_owner_delivery', attempts: 0 };
  return deliverOnce(pool, transports, {
    effectKey: n.effectKey,
    conversationKey: null,
    turnId: null,
    target: owner,
    message: { agentId: n.agentId, conversationId: null, turnId: null, text: n.text, idempotencyKey: n.effectKey },
  });
}
