import { scriptedDelegatePlan, scriptedPlan, type ScriptedPlan, type ScriptedQueue } from '../../domain/scripted-model';
import { scriptedReflectionAnswer } from '../../domain/reflection';
import { scriptedRoutineAnswer } from '../../domain/tool-authoring';
import {
  ModelRetryableError,
  ZERO_USAGE,
  type ModelCallContext,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type ModelUsage,
} from '../../domain/model';
import { estimatedInputTokens, tokensOfChars } from '../../domain/spend';

/** Thrown for a scripted `/error` turn; the model activity makes it a non-retryable turn error. */
export class ScriptedTurnError extends Error {
  override name = 'ScriptedTurnError';
}

/**
 * The scripted model: deterministic and offline. It answers queued exact responses first (per conversation), then
 * follows the command language of domain/scripted-model.ts. Shipped for demos and used by every test.
 */
export function createScriptedProvider(queue: ScriptedQueue): ModelProvider {
  return {
    name: 'scripted',
    async call(request: ModelRequest, ctx: ModelCallContext): Promise<ModelResponse> {
      const callKey = `${ctx.conversationKey}/${ctx.turnId}/${ctx.callIndex}`;
      const queued = await queue.take(ctx.conversationKey, callKey);
      if (queued) {
        const { delayMs, ...response } = queued;
        if (delayMs) await streamSlowly(replyText(response.content), delayMs, ctx);
        return { ...response, model: 'scripted' };
      }
      // A routine's tool authoring and its `ai.*` capabilities, and reflection, have answers of their own.
      const answer =
        scriptedRoutineAnswer(request.system, request.messages) ??
        scriptedReflectionAnswer(request.system, request.messages);
      if (answer !== undefined) {
        const content = [{ type: 'text' as const, text: answer }];
        return { content, stopReason: 'end_turn', usage: scriptedUsage(request, content), model: 'scripted' };
      }
      // A delegate is recognised by its tools: it reports with set_status instead of replying.
      const plan = request.tools.some((t) => t.name === 'set_status')
        ? scriptedDelegatePlan(request.system, request.messages, ctx.callIndex)
        : scriptedPlan(request.messages, ctx.callIndex);
      return perform(plan, request, ctx);
    },
  };
}

/**
 * The scripted model bills as a real one would, about one token per 4 characters: its request in, its answer out.
 * Deterministic, so that spending is testable offline (docs/spend.md).
 */
function scriptedUsage(request: ModelRequest, content: ModelResponse['content']): ModelUsage {
  return {
    ...ZERO_USAGE,
    inputTokens: estimatedInputTokens(request),
    outputTokens: tokensOfChars(JSON.stringify(content).length),
  };
}

async function perform(plan: ScriptedPlan, request: ModelRequest, ctx: ModelCallContext): Promise<ModelResponse> {
  switch (plan.kind) {
    case 'error':
      throw new ScriptedTurnError(plan.message);
    case 'fail':
      if (ctx.attempt <= plan.attemptsToFail)
        throw new ModelRetryableError(`scripted failure, attempt ${ctx.attempt} of ${plan.attemptsToFail}`);
      return perform(plan.then, request, ctx);
    case 'respond': {
      const text = replyText(plan.content);
      if (plan.delayMs > 0) await streamSlowly(text, plan.delayMs, ctx);
      else if (text) ctx.onTextDelta(text);
      return {
        content: plan.content,
        stopReason: plan.content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
        usage: scriptedUsage(request, plan.content),
        model: 'scripted',
      };
    }
  }
}

/** Streams the reply in pieces over `delayMs`, heartbeating, so that an interrupt finds partial text to keep. */
async function streamSlowly(text: string, delayMs: number, ctx: ModelCallContext): Promise<void> {
  const steps = Math.max(1, Math.ceil(delayMs / 250));
  const words = text.split(/(?<=\s)/);
  for (let i = 0; i < steps; i++) {
    ctx.heartbeat();
    await ctx.sleep(delayMs / steps);
    const from = Math.floor((i * words.length) / steps);
    const to = Math.floor(((i + 1) * words.length) / steps);
    const piece = words.slice(from, to).join('');
    if (piece) ctx.onTextDelta(piece);
  }
}

function replyText(content: ModelResponse['content']): string {
  return content
    .map((b) => (b.type === 'text' ? b.text : typeof b.input.text === 'string' ? b.input.text : ''))
    .join('');
}
