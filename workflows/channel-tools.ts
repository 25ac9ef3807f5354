import type { TurnEnd } from '../domain/conversation';
import { replyEffectKey } from '../domain/ids';
import { LIMITS } from '../domain/limits';
import type { ToolResultBlock, ToolUseBlock } from '../domain/model';
import { checkReply, guardErrorForModel } from '../domain/reply-guard';
import { replyTool, skipTool, toolSpec } from '../domain/tools';
import { toolResult } from '../domain/transcript';
import { delivery } from './activities';

/** What a channel tool sees of the turn it runs in. */
export interface TurnContext {
  conversationKey: string;
  agentId: string;
  conversationId: string;
  turnId: string;
  callIndex: number;
  /** Transcript row of the model call that asked for the tool. */
  stepSeq: number;
  /** Replies blocked by the guard so far in this turn. */
  corrections: number;
}

export interface ToolOutcome {
  result: ToolResultBlock;
  /** Set when the tool ends the turn. */
  end?: TurnEnd;
}

type ToolHandler = (call: ToolUseBlock, input: never, turn: TurnContext) => Promise<ToolOutcome>;

/**
 * A reply passes the guard, then the delivery activity. A blocked reply goes back to the model as a tool error,
 * at most LIMITS.guardCorrections times; one more blocked reply ends the turn with nothing sent.
 */
export async function sendReply(toolUseId: string, text: string, turn: TurnContext): Promise<ToolOutcome> {
  const verdict = checkReply(text);
  if (!verdict.ok) {
    turn.corrections++;
    const message = guardErrorForModel(verdict);
    if (turn.corrections > LIMITS.guardCorrections) {
      return { result: toolResult(toolUseId, message, true), end: { status: 'error', error: { code: 'reply_blocked', message: `reply blocked ${turn.corrections} times: ${verdict.detail}` } } };
    }
    return { result: toolResult(toolUseId, message, true) };
  }
  const report = await delivery.deliverReply({
    conversationKey: turn.conversationKey,
    agentId: turn.agentId,
    conversationId: turn.conversationId,
    turnId: turn.turnId,
    replySeq: turn.stepSeq,
    text,
    effectKey: replyEffectKey(turn.conversationKey, turn.turnId, turn.callIndex),
  });
  return { result: toolResult(toolUseId, `reply ${report.outcome}`), end: { status: 'replied', replySeq: turn.stepSeq, delivery: report.outcome } };
}

/** The channel's tool handlers by name. Later capabilities add theirs here and their specs in domain/tools. */
const handlers: Record<string, ToolHandler> = {
  [replyTool.name]: (call, input: { text: string }, turn) => sendReply(call.id, input.text, turn),
  [skipTool.name]: (call, input: { reason?: string }) =>
    Promise.resolve({ result: toolResult(call.id, 'skipped'), end: { status: 'skipped', ...(input.reason ? { reason: input.reason } : {}) } }),
};

export async function dispatchTool(call: ToolUseBlock, turn: TurnContext): Promise<ToolOutcome> {
  const spec = toolSpec(call.name);
  const handler = handlers[call.name];
  if (!spec || !handler) return { result: toolResult(call.id, `unknown tool "${call.name}"`, true) };
  const parsed = spec.input.safeParse(call.input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { result: toolResult(call.id, `invalid arguments for ${call.name}: ${issue ? `${issue.path.join('.') || 'input'}: ${issue.message}` : 'invalid'}`, true) };
  }
  return handler(call, parsed.data as never, turn);
}
