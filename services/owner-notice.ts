import type { Transports } from '../adapters/delivery/transport';
import { getAgent } from '../db/agents';
import type { Pool } from '../db/pool';
import type { DeliveryReport } from '../domain/delivery';
import { budgetNoticeEffectKey } from '../domain/ids';
import { deliverOnce } from './delivery';
import { BudgetStop } from './model-call';
import type { Step } from './step';

/**
 * A notice to the agent's owner (its owner delivery), sent at most once per key through the effects ledger: a
 * failed job, a spent budget. Skipped when the agent has no owner delivery.
 */
export async function noticeToOwner(
  pool: Pool,
  transports: Transports,
  n: { agentId: string; effectKey: string; text: string },
  step: Pick<Step, 'signal' | 'heartbeat'>,
): Promise<DeliveryReport> {
  const owner = (await getAgent(pool, n.agentId))?.ownerDelivery;
  if (!owner) return { outcome: 'skipped:no_owner_delivery', attempts: 0 };
  return deliverOnce(pool, transports, {
    effectKey: n.effectKey,
    conversationKey: null,
    turnId: null,
    target: owner,
    message: { agentId: n.agentId, conversationId: null, turnId: null, text: n.text, idempotencyKey: n.effectKey },
    ...step,
  });
}

/**
 * Tells the owner that a budget stopped a model call, at most once per budget and period (the effects ledger). Raised
 * by the step whose call was stopped; a send that fails is tried again at the next stop, and never fails the step.
 */
export async function noticeBudgetStop(
  pool: Pool,
  transports: Transports,
  agentId: string,
  stop: BudgetStop,
  step: Pick<Step, 'signal' | 'heartbeat'>,
): Promise<void> {
  const text = `Agent ${agentId}: a model call was not made because ${stop.message}. Raise the budget to go on.`;
  await noticeToOwner(
    pool,
    transports,
    { agentId, effectKey: budgetNoticeEffectKey(agentId, stop.periodKey), text },
    step,
  ).catch(() => undefined);
}

/** Who hears of a budget stop in a step: the agent's owner, through the step's transports. */
export interface BudgetNotice {
  pool: Pool;
  transports: Transports;
  agentId: string;
  step: Pick<Step, 'signal' | 'heartbeat'>;
}

/** A step's model call; a budget that stops it tells the owner (noticeBudgetStop), and the stop is thrown on. */
export async function noticingBudgetStop<T>(n: BudgetNotice, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    if (err instanceof BudgetStop) await noticeBudgetStop(n.pool, n.transports, n.agentId, err, n.step);
    throw err;
  }
}
