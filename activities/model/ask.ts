import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { FAILURE } from '../../domain/failures';
import { ModelRequestError, type ModelCallContext, type ModelProvider, type ModelResponse } from '../../domain/model';

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

/**
 * A question asked by the running activity, with its attempt, heartbeat, cancellation and sleep. A request the model
 * refuses fails the activity for good; anything else is retried by Temporal.
 */
export async function askFromActivity(
  provider: ModelProvider,
  q: Question,
  call: Pick<ModelCallContext, 'conversationKey' | 'turnId' | 'callIndex'>,
): Promise<ModelResponse> {
  const ctx = Context.current();
  try {
    return await askModel(provider, q, {
      ...call,
      attempt: ctx.info.attempt,
      heartbeat: () => ctx.heartbeat(),
      signal: ctx.cancellationSignal,
      sleep: (ms) => ctx.sleep(ms),
    });
  } catch (err) {
    if (err instanceof ModelRequestError) throw ApplicationFailure.nonRetryable(err.message, FAILURE.modelRequest);
    throw err;
  }
}
