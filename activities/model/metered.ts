import { ApplicationFailure } from '@temporalio/common';
import { agentBudgets, ownRunBudgetUsd, release, reserve, settle, type Overrun } from '../../db/spend';
import { pauseBucket, settleBucket, takeTurn } from '../../db/rate-limits';
import type { Pool, Queryable } from '../../db/pool';
import { FAILURE } from '../../domain/failures';
import { budgetNoticeEffectKey } from '../../domain/ids';
import { noticeToOwner } from '../delivery/owner-notice';
import type { Transports } from '../delivery/deliver-reply';
import { ModelRetryableError, type ModelRequest, type ModelResponse } from '../../domain/model';
import { rateLimitFor, type RateLimits } from '../../domain/rate-limits';
import {
  budgetPeriodKey,
  budgetsFor,
  costOf,
  describeBudget,
  estimatedInputTokens,
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
  /** The provider's rate limits (KEEL_RATE_LIMITS), shared by every worker through PostgreSQL; none when absent. */
  rates?: { provider: string; limits: RateLimits };
}

/** A call's reservation, placed: settle it with the answer (in the caller's transaction), or release it. */
export interface Reservation {
  settle(db: Queryable, res: ModelResponse): Promise<void>;
  /** The call failed: its hold goes back, and a provider's 429 pauses the rate bucket for as long as it asked. */
  release(err?: unknown): Promise<void>;
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
 * A call waiting for its place under a provider's rate limit: a retryable failure whose retry comes when the place
 * is due, so the wait is Temporal's durable retry timer, never a sleep that holds a worker's slot.
 */
export function rateLimitWait(bucket: string, waitMs: number): ApplicationFailure {
  return ApplicationFailure.create({
    type: FAILURE.modelRateLimited,
    message: `waiting ${(waitMs / 1000).toFixed(1)} s for its place under the rate limit of ${bucket}`,
    nextRetryDelay: waitMs,
  });
}

/**
 * Readies a model call: first its place under the provider's rate limit (throws rateLimitWait when it must wait),
 * then its worst case reserved against every budget of its payer (throws BudgetStop when one would be overrun).
 */
export async function reserveCall(
  deps: SpendDeps,
  c: { callKey: string; attempt: number; payer: Payer; request: ModelRequest },
): Promise<Reservation> {
  const { pool, prices } = deps;
  const rate = deps.rates && rateLimitFor(deps.rates.limits, deps.rates.provider, c.request.model);
  const taken = { requests: 1, inputTokens: estimatedInputTokens(c.request), outputTokens: c.request.maxTokens };
  if (rate) {
    const waitMs = await takeTurn(pool, { callKey: c.callKey, bucket: rate.bucket, limit: rate.limit, cost: taken });
    if (waitMs > 0) throw rateLimitWait(rate.bucket, waitMs);
  }
  const price = priceOf(prices, c.request.model);
  const worstUsd = worstCaseUsd(c.request, price);
  const ownPerRunUsd = await ownRunBudgetUsd(pool, c.payer);
  const budgets: BudgetLimit[] = budgetsFor(c.payer, await agentBudgets(pool, c.payer.agentId), new Date(), {
    ...(ownPerRunUsd === undefined ? {} : { perRunUsd: ownPerRunUsd }),
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
    settle: async (db, res) => {
      await settle(db, {
        callKey: c.callKey,
        attempt: c.attempt,
        model: res.model,
        usage: res.usage,
        costUsd: costOf(res.usage, priceOf(prices, res.model)),
      });
      if (!rate) return;
      // The bucket took the estimate and max_tokens; it keeps only what the answer used.
      const usedInput = res.usage.inputTokens + res.usage.cacheWriteTokens;
      const unused = {
        inputTokens: taken.inputTokens - usedInput,
        outputTokens: taken.outputTokens - res.usage.outputTokens,
      };
      await settleBucket(pool, rate.bucket, rate.limit, unused).catch(() => undefined);
    },
    release: async (err) => {
      await release(pool, c.callKey);
      if (rate && err instanceof ModelRetryableError && err.status === 429 && err.retryAfterMs)
        await pauseBucket(pool, rate.bucket, err.retryAfterMs);
    },
  };
}
