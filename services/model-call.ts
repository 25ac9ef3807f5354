import { ApplicationFailure } from '@temporalio/common';
import { pauseBucket, settleBucket, takeTurn } from '../db/rate-limits';
import { agentBudgets, ownRunBudgetUsd, release, reserve, settle, type Overrun, type Settle } from '../db/spend';
import { inTransaction, type Pool, type Queryable } from '../db/pool';
import { FAILURE } from '../domain/failures';
import { ModelRequestError, ModelRetryableError } from '../domain/model';
import type { CallSpend, ModelCallContext, ModelProvider, ModelRequest, ModelResponse } from '../domain/model';
import { rateLimitFor, type RateLimits } from '../domain/rate-limits';
import {
  budgetPeriodKey,
  budgetsFor,
  costOf,
  estimatedInputTokens,
  overrunMessage,
  priceOf,
  worstCaseUsd,
  type BudgetLimit,
  type Budgets,
  type Payer,
  type PriceTable,
} from '../domain/spend';
import { ScriptedTurnError } from '../adapters/model/scripted';
import { heartbeatWhile } from './step';

/** What a metered model call needs: the provider, PostgreSQL for the ledger and rate buckets, prices and limits. */
export interface ModelCallDeps {
  pool: Pool;
  provider: ModelProvider;
  prices: PriceTable;
  /** The provider's rate limits (KEEL_RATE_LIMITS), shared by every worker through PostgreSQL; none when absent. */
  rates?: { provider: string; limits: RateLimits };
}

/** A model call not made: a budget would be overrun. The message names the budget and what it has left. */
export class BudgetStop extends Error {
  override name = 'BudgetStop';
  constructor(
    readonly overrun: Overrun,
    /** The budget's period (a day, a month, a run): its owner is told once per period. */
    readonly periodKey: string,
  ) {
    super(overrunMessage(overrun));
  }
}

/**
 * A call waiting for its place under a provider's rate limit: a retryable failure whose retry comes when the place
 * is due, so the wait is Temporal's durable retry timer, never a sleep that holds a worker's slot.
 */
function rateLimitWait(bucket: string, waitMs: number): ApplicationFailure {
  return ApplicationFailure.create({
    type: FAILURE.modelRateLimited,
    message: `waiting ${(waitMs / 1000).toFixed(1)} s for its place under the rate limit of ${bucket}`,
    nextRetryDelay: waitMs,
  });
}

/** One model call, metered. */
export type MeteredCall<T> = MeteredCallOf &
  (
    | {
        /** Commits the answer in the transaction its spending settles in, so that a retry finds both or neither. */
        commit: (db: Queryable, res: ModelResponse) => Promise<T>;
        commitWithSpend?: never;
      }
    | {
        /** Commits the answer and settles its spending (`settle`) in one statement: both or neither. */
        commitWithSpend: (
          db: Queryable,
          res: ModelResponse,
          settle: Settle,
        ) => Promise<{ value: T; spend?: CallSpend }>;
        commit?: never;
      }
  );

interface MeteredCallOf {
  /** The key its spending is recorded under (docs/spend.md); the same on every attempt. */
  callKey: string;
  payer: Payer;
  request: ModelRequest;
  /** The provider's view of the caller: its attempt, heartbeat, cancellation, sleep and streamed text. */
  context: ModelCallContext;
  /** The call was made and failed (its hold already back): the caller's record of it, and the error to throw. */
  failed?: (err: unknown) => Promise<unknown>;
  /** The payer's agent's budgets, when the caller has read its agent already: not read again. */
  agentBudgets?: Budgets;
  /** The own per-run budget of the payer's job or routine (`usd` absent: none), when the caller has read it. */
  ownRunBudget?: { usd?: number };
}

/**
 * The one model call every caller makes (turns, delegates, authoring, reflection and its judges, routine `ai.*`):
 * its place under the provider's rate limit (a retryable wait when it must wait), its worst case reserved against
 * every budget of its payer (BudgetStop when one would be overrun), the call, heartbeating, then the answer committed
 * with its spending, or the hold released.
 */
export async function meteredModelCall<T>(
  deps: ModelCallDeps,
  call: MeteredCall<T>,
): Promise<{ response: ModelResponse; committed: T; spend?: CallSpend }> {
  const { pool, prices } = deps;
  const { request } = call;
  const rate = deps.rates && rateLimitFor(deps.rates.limits, deps.rates.provider, request.model);
  // Estimated once: it serialises the whole request.
  const inputTokens = estimatedInputTokens(request);
  const taken = { requests: 1, inputTokens, outputTokens: request.maxTokens };
  if (rate) {
    const waitMs = await takeTurn(pool, { callKey: call.callKey, bucket: rate.bucket, limit: rate.limit, cost: taken });
    if (waitMs > 0) throw rateLimitWait(rate.bucket, waitMs);
  }
  const [ownPerRunUsd, agentLimits] = await Promise.all([
    call.ownRunBudget ? call.ownRunBudget.usd : ownRunBudgetUsd(pool, call.payer),
    call.agentBudgets ?? agentBudgets(pool, call.payer.agentId),
  ]);
  const budgets: BudgetLimit[] = budgetsFor(call.payer, agentLimits, new Date(), {
    ...(ownPerRunUsd === undefined ? {} : { perRunUsd: ownPerRunUsd }),
  });
  const overrun = await reserve(pool, {
    callKey: call.callKey,
    payer: call.payer,
    model: request.model,
    worstUsd: worstCaseUsd({ inputTokens, maxTokens: request.maxTokens }, priceOf(prices, request.model)),
    budgets,
  });
  if (overrun) throw new BudgetStop(overrun, budgetPeriodKey(budgets.find((b) => b.name === overrun.name)!));

  let done: { response: ModelResponse; committed: T; spend?: CallSpend };
  try {
    // Heartbeats on a timer as well as on the provider's stream events: a model slow to its first token is alive.
    const res = await heartbeatWhile(deps.provider.call(request, call.context), () => call.context.heartbeat());
    // The answer and its spending commit together; a retry finds both or neither.
    const spent: Settle = {
      callKey: call.callKey,
      attempt: call.context.attempt,
      model: res.model,
      usage: res.usage,
      costUsd: costOf(res.usage, priceOf(prices, res.model)),
    };
    const { commit } = call;
    const { committed, spend } = commit
      ? await inTransaction(pool, async (db) => ({ committed: await commit(db, res), spend: await settle(db, spent) }))
      : await call.commitWithSpend(pool, res, spent).then((c) => ({ committed: c.value, spend: c.spend }));
    done = { response: res, committed, ...(spend ? { spend } : {}) };
  } catch (err) {
    // No answer paid for: the hold goes back (a crash leaves it to the retry, which reserves again in its place),
    // and a provider's 429 pauses the rate bucket for as long as it asked.
    await release(pool, call.callKey).catch(() => undefined);
    if (rate && err instanceof ModelRetryableError && err.status === 429 && err.retryAfterMs)
      await pauseBucket(pool, rate.bucket, err.retryAfterMs).catch(() => undefined);
    throw call.failed ? await call.failed(err) : err;
  }
  const { usage } = done.response;
  if (rate) {
    // The bucket took the estimate and max_tokens; it keeps only what the answer used.
    const unused = {
      inputTokens: taken.inputTokens - (usage.inputTokens + usage.cacheWriteTokens),
      outputTokens: taken.outputTokens - usage.outputTokens,
    };
    await settleBucket(pool, rate.bucket, rate.limit, unused).catch(() => undefined);
  }
  return done;
}

/** A question to the model outside a conversation's turn: a system prompt and one user message, no tools. */
export interface Question {
  model: string;
  system: string;
  text: string;
  maxTokens: number;
}

/** A question's asker as the provider reads it; nobody listens to its streamed text. */
export type Asker = Omit<ModelCallContext, 'onTextDelta'>;

/**
 * A question (reflection and its judges, routine authoring, a routine's `ai.*` capability), asked as a metered call:
 * reserved against the payer's budgets, settled after. A budget stop and a refused request throw as they are.
 */
export async function askQuestion(
  deps: ModelCallDeps,
  q: Question,
  call: {
    callKey: string;
    payer: Payer;
    asker: Asker;
    /** Keeps the answer in the transaction its spending settles in, for a caller whose retry must not ask again. */
    keep?: (db: Queryable, res: ModelResponse) => Promise<unknown>;
  },
): Promise<ModelResponse> {
  const messages = [{ role: 'user' as const, content: [{ type: 'text' as const, text: q.text }] }];
  const { response } = await meteredModelCall(deps, {
    callKey: call.callKey,
    payer: call.payer,
    request: { model: q.model, system: q.system, messages, tools: [], maxTokens: q.maxTokens },
    context: { ...call.asker, onTextDelta: () => undefined },
    commit: call.keep ?? (async () => undefined),
  });
  return response;
}

/**
 * A model call as an activity's failure: a budget stop and a request the model refuses are not retried (the
 * workflow decides what they mean for its turn, delegate or run); a retryable provider error honours the server's
 * Retry-After; anything else is retried by Temporal's policy.
 */
export function modelCallFailure(err: unknown): unknown {
  if (err instanceof BudgetStop)
    return ApplicationFailure.create({
      type: FAILURE.budgetExhausted,
      nonRetryable: true,
      message: err.message,
      details: [err.overrun],
    });
  if (err instanceof ModelRetryableError)
    return ApplicationFailure.create({
      message: err.message,
      type: FAILURE.modelRetryable,
      nextRetryDelay: err.retryAfterMs,
    });
  if (err instanceof ModelRequestError)
    return ApplicationFailure.nonRetryable(err.message, FAILURE.modelRequest, { status: err.status });
  if (err instanceof ScriptedTurnError) return ApplicationFailure.nonRetryable(err.message, FAILURE.modelTurnError);
  return err;
}
