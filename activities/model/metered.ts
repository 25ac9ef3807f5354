import { ApplicationFailure } from '@temporalio/common';
import { agentBudgets, release, reserve, settle } from '../../db/spend';
import type { Pool, Queryable } from '../../db/pool';
import { FAILURE } from '../../domain/failures';
import type { ModelRequest, ModelResponse } from '../../domain/model';
import {
  budgetsFor,
  costOf,
  describeBudget,
  formatUsd,
  priceOf,
  worstCaseUsd,
  type Payer,
  type PriceTable,
} from '../../domain/spend';

export interface SpendDeps {
  pool: Pool;
  prices: PriceTable;
}

/** A call's reservation, placed: settle it with the answer (in the caller's transaction), or release it. */
export interface Reservation {
  settle(db: Queryable, res: ModelResponse): Promise<void>;
  release(): Promise<void>;
}

/**
 * Reserves a model call's worst case against every budget of its payer before the call. A budget it would overrun
 * fails the activity for good (FAILURE.budgetExhausted, naming the budget); the workflow decides what that means for
 * a turn, a delegate, a job run or a routine run.
 */
export async function reserveCall(
  deps: SpendDeps,
  c: { callKey: string; attempt: number; payer: Payer; request: ModelRequest; ownPerRunUsd?: number },
): Promise<Reservation> {
  const { pool, prices } = deps;
  const price = priceOf(prices, c.request.model);
  const worstUsd = worstCaseUsd(c.request, price);
  const budgets = budgetsFor(c.payer, await agentBudgets(pool, c.payer.agentId), new Date(), {
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
    throw ApplicationFailure.create({
      type: FAILURE.budgetExhausted,
      nonRetryable: true,
      message:
        `${describeBudget(overrun.name, overrun.limitUsd)} is spent: ${formatUsd(overrun.spentUsd)} spent and ` +
        `${formatUsd(overrun.heldUsd)} reserved, and this call could cost up to ${formatUsd(overrun.neededUsd)}`,
      details: [overrun],
    });
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
