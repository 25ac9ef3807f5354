import { ApplicationFailure } from '@temporalio/common';
import { agentBudgets, release, reserve, settle, type Overrun } from '../../db/spend';
import type { Pool, Queryable } from '../../db/pool';
import { FAILURE } from '../../domain/failures';
import { budgetNoticeEffectKey } from '../../domain/ids';
import { noticeToOwner } from '../delivery/owner-notice';
import type { Transports } from '../delivery/deliver-reply';
import type { ModelRequest, ModelResponse } from '../../domain/model';
import {
  budgetPeriodKey,
  budgetsFor,
  costOf,
  describeBudget,
  formatUsd,
  priceOf,
  worstCaseUsd,
  type BudgetLimit,
  type Payer,
  type PriceTable,
} from '../../domain/spend';

export interface SpendDeps {
  pool: Pool;
  prices: PriceTable;
  /** How the owner hears that a budget stopped a call (once per budget and period); not told when absent. */
  transports?: Transports;
}

/** A call's reservation, placed: settle it with the answer (in the caller's transaction), or release it. */
export interface Reservation {
  settle(db: Queryable, res: ModelResponse): Promise<void>;
  release(): Promise<void>;
}

/** A model call not made: a budget would be overrun. The message names the budget and what it has left. */
export class BudgetStop extends Error {
  override name = 'BudgetStop';
  constructor(readonly overrun: Overrun) {
    super(
      `${describeBudget(overrun.name, overrun.limitUsd)} is spent: ${formatUsd(overrun.spentUsd)} spent and ` +
        `${formatUsd(overrun.heldUsd)} reserved, and this call could cost up to ${formatUsd(overrun.neededUsd)}`,
    );
  }

  /** As an activity's failure: not retried; the workflow decides what it means for its turn, delegate or run. */
  toFailure(): ApplicationFailure {
    return ApplicationFailure.create({
      type: FAILURE.budgetExhausted,
      nonRetryable: true,
      message: this.message,
      details: [this.overrun],
    });
  }
}

/**
 * Reserves a model call's worst case against every budget of its payer before the call; throws BudgetStop when one
 * would be overrun.
 */
export async function reserveCall(
  deps: SpendDeps,
  c: { callKey: string; attempt: number; payer: Payer; request: ModelRequest; ownPerRunUsd?: number },
): Promise<Reservation> {
  const { pool, prices } = deps;
  const price = priceOf(prices, c.request.model);
  const worstUsd = worstCaseUsd(c.request, price);
  const budgets: BudgetLimit[] = budgetsFor(c.payer, await agentBudgets(pool, c.payer.agentId), new Date(), {
    ...(c.ownPerRunUsd === undefined ? {} : { perRunUsd: c.ownPerRunUsd }),
  });
  const overrun = await reserve(pool, {
    callKey: c.callKey,
    payer: c.payer,
    model: c.request.model,
    worstUsd,
    budgets,
  });
  if (overrun) {
    const stop = new BudgetStop(overrun);
    const budget = budgets.find((b) => b.name === overrun.name)!;
    if (deps.transports) {
      // At most once per budget and period (the effects ledger); a send that fails is tried again at the next stop.
      await noticeToOwner(pool, deps.transports, {
        agentId: c.payer.agentId,
        effectKey: budgetNoticeEffectKey(c.payer.agentId, budgetPeriodKey(budget)),
        text: `Agent ${c.payer.agentId}: a model call was not made because ${stop.message}. Raise the budget to go on.`,
      }).catch(() => undefined);
    }
    throw stop;
  }
  return {
    settle: (db, res) =>
      settle(db, {
        callKey: c.callKey,
        attempt: c.attempt,
        model: res.model,
        usage: res.usage,
        costUsd: costOf(res.usage, priceOf(prices, res.model)),
      }),
    release: () => release(pool, c.callKey),
  };
}
