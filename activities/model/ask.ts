import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { FAILURE } from '../../domain/failures';
import { ModelRequestError, type ModelCallContext, type ModelProvider, type ModelResponse } from '../../domain/model';
import type { Payer } from '../../domain/spend';
import { BudgetStop, reserveCall, type SpendDeps } from './metered';

/** A question to the model outside a conversation's turn: a system prompt and one user message, no tools. */
export interface Question {
  model: string;
  system: string;
  text: string;
  maxTokens: number;
}

/** What the provider reads of the asker; nobody listens to the streamed text. */
export type Asker = Omit<ModelCallContext, 'onTextDelta'>;

/** One model call that answers a question (reflection, routine authoring, a routine's `ai.*` capability). */
export async function askModel(provider: ModelProvider, q: Question, asker: Asker): Promise<ModelResponse> {
  const messages = [{ role: 'user' as const, content: [{ type: 'text' as const, text: q.text }] }];
  return provider.call(
    { model: q.model, system: q.system, messages, tools: [], maxTokens: q.maxTokens },
    { ...asker, onTextDelta: () => undefined },
  );
}

/** Who pays for a question, and the key its spending is recorded under (docs/spend.md). */
export interface QuestionSpend {
  deps: SpendDeps;
  callKey: string;
  payer: Payer;
}

/**
 * A question asked by the running activity, with its attempt, heartbeat, cancellation and sleep, reserved against
 * the payer's budgets first and settled after. A request the model refuses, or a budget that does not allow it,
 * fails the activity for good; anything else is retried by Temporal.
 */
export async function askFromActivity(
  provider: ModelProvider,
  q: Question,
  call: Pick<ModelCallContext, 'conversationKey' | 'turnId' | 'callIndex'>,
  spend: QuestionSpend,
): Promise<ModelResponse> {
  const ctx = Context.current();
  const attempt = ctx.info.attempt;
  const messages = [{ role: 'user' as const, content: [{ type: 'text' as const, text: q.text }] }];
  const reservation = await reserveCall(spend.deps, {
    callKey: spend.callKey,
    attempt,
    payer: spend.payer,
    request: { model: q.model, system: q.system, messages, tools: [], maxTokens: q.maxTokens },
  }).catch((err: unknown) => {
    throw err instanceof BudgetStop ? err.toFailure() : err;
  });
  try {
    const res = await askModel(provider, q, {
      ...call,
      attempt,
      heartbeat: () => ctx.heartbeat(),
      signal: ctx.cancellationSignal,
      sleep: (ms) => ctx.sleep(ms),
    });
    await reservation.settle(spend.deps.pool, res);
    return res;
  } catch (err) {
    await reservation.release(err).catch(() => undefined);
    if (err instanceof ModelRequestError) throw ApplicationFailure.nonRetryable(err.message, FAILURE.modelRequest);
    throw err;
  }
}
