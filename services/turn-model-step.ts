import type { Transports } from '../adapters/delivery/transport';
import {
  attemptResult,
  isSettled,
  type PrepareToolCallInput,
  type SettledAttempt,
  type ToolAttempts,
} from '../contracts/tool-calls';
import type { FinalReply } from '../domain/conversation';
import type { DeliveryReport } from '../domain/delivery';
import { messageWaits } from '../db/conversations';
import { replyEffectKey } from '../domain/ids';
import type { CallModelInput, ModelStep, ToolUseBlock } from '../domain/model';
import { checkReply } from '../domain/reply-guard';
import type { SecretRules } from '../domain/secret-scan';
import { isServerToolName } from '../domain/tool-servers';
import { replyTool } from '../domain/tools';
import { textOf, toolUses } from '../domain/transcript';
import { callTurnModel, type BeforeModelCall, type ConversationModelDeps } from './conversation-model-call';
import { deliverFinalReply } from './final-reply';
import type { Step } from './step';
import { prepareAndRunToolCall, type ToolCallDeps } from './tool-calls';

/** What a turn's model step needs to send a reply that ends the turn itself, as the workflow would send it. */
export interface ReplyAtOnce extends Omit<FinalReply, 'toolResults' | 'replyToolUseId'> {
  conversationId: string;
  /** The reply guard's secret rules, as the workflow's own guard would apply them. */
  rules: SecretRules;
}

export type TurnModelStepInput = CallModelInput & {
  before: BeforeModelCall;
  /** Prepare the tool servers' calls the answer asks for, and run those that may run at once, in this step. */
  runTools?: boolean;
  /** Send a reply that ends the turn, and commit the turn's end, in this step. */
  replyAtOnce?: ReplyAtOnce;
  /**
   * When every tool call the answer asks for has run (or was answered without running), go on in this step with the
   * turn's next model call, and so on, up to this call index: the turn's limit.
   */
  upToCall?: number;
};

/**
 * A turn's model step, with what it did after the answer when asked to: the tool calls it prepared and ran
 * (`toolAttempts`), the reply it sent with the turn's end (`replied`), or the turn's next model step, which it took
 * itself once all its tool calls had run (`next`, their results written before it).
 */
export type TurnModelStep =
  (ModelStep & { toolAttempts?: ToolAttempts; replied?: DeliveryReport; next?: TurnModelStep }) | { ended: true };

export interface TurnModelStepDeps {
  model: ConversationModelDeps;
  tools: ToolCallDeps;
  transports: Transports;
}

/**
 * A turn's model call and, once its answer is committed, the effects that answer leads to which need neither a person
 * nor the workflow's judgement: one hand-over to the workflow fewer for each. Every effect keeps its own ledger, so a
 * retried step answers what it recorded and sends nothing twice. Whatever this step leaves (a call that waits for a
 * person or fails, a channel tool, a reply the guard blocks) the workflow takes up in order, as steps of their own.
 */
export async function callTurnModelAndEffects(
  deps: TurnModelStepDeps,
  input: TurnModelStepInput,
  step: Step,
): Promise<TurnModelStep> {
  const { runTools, replyAtOnce, upToCall, ...call } = input;
  const answer = await callTurnModel(deps.model, call, step);
  if ('ended' in answer) return answer;
  // An interrupting message cuts the model call only: what its answer leads to is done, or left to the workflow.
  const effectStep = uninterrupted(step);
  if (replyAtOnce) {
    const replied = await replyEndingTurn(deps, call, answer, replyAtOnce, effectStep);
    if (replied) return { ...answer, replied };
  }
  if (!runTools) return answer;
  const uses = toolUses(answer.content);
  const toolAttempts = await runServerTools(deps.tools, call, uses, effectStep);
  if (!Object.keys(toolAttempts).length) return answer;
  const ran = { ...answer, toolAttempts };
  const attempts = uses.map((u) => toolAttempts[u.id]);
  // The turn's next model call, as the workflow would make it: unless a call waits for a person or is the workflow's
  // own (a channel tool), or the turn is out of calls, or a message came that the workflow must place first (one
  // steered into the turn, which its next call reads; an interrupt).
  const allSettled = attempts.every((a): a is SettledAttempt => a !== undefined && isSettled(a));
  if (!allSettled || upToCall === undefined || call.callIndex >= upToCall || step.cancelRequested()) return ran;
  if (await messageWaits(deps.model.pool, call.conversationKey, ['steer', 'interrupt'])) return ran;
  const results = uses.map((u, i) => attemptResult(u.id, attempts[i]!));
  const nextCall: TurnModelStepInput = {
    ...input,
    callIndex: call.callIndex + 1,
    throughSeq: answer.seq,
    before: { append: { toolResults: { callIndex: call.callIndex, results } } },
    ...(replyAtOnce ? { replyAtOnce: { ...replyAtOnce, modelCalls: call.callIndex + 1 } } : {}),
  };
  // A next call that fails (or is interrupted) is the workflow's to take up, as a step of its own.
  const next = await callTurnModelAndEffects(deps, nextCall, step).catch(() => undefined);
  return next && !('ended' in next) ? { ...ran, next } : ran;
}

/**
 * The tool servers' calls the answer asks for first, in its order, each prepared under its idempotency key and run
 * when its policy lets it run without a person; up to the first that waits for a person, fails, or is a channel tool.
 */
async function runServerTools(
  deps: ToolCallDeps,
  call: CallModelInput,
  uses: ToolUseBlock[],
  step: Step,
): Promise<ToolAttempts> {
  const attempts: ToolAttempts = {};
  for (const toolUse of uses) {
    if (!isServerToolName(toolUse.name)) break;
    const prepare: PrepareToolCallInput = {
      agentId: call.agentId,
      origin: 'conversation',
      transcriptKey: call.conversationKey,
      conversationKey: call.conversationKey,
      turnId: call.turnId,
      callIndex: call.callIndex,
      toolUse,
      workflowId: call.workflowId ?? call.conversationKey,
    };
    const attempt = await prepareAndRunToolCall(deps, prepare, step).catch(() => undefined);
    if (!attempt) break;
    attempts[toolUse.id] = attempt;
    if (attempt.kind === 'approve') break;
  }
  return attempts;
}

/** An answer's reply when it ends the turn: its plain text, or the text of a sole call of the reply tool. */
export function endingReply(content: ModelStep['content']): { text?: string; sole?: ToolUseBlock } {
  const uses = toolUses(content);
  const sole = uses.length === 1 && uses[0]!.name === replyTool.name ? uses[0] : undefined;
  const parsed = sole && replyTool.input.safeParse(sole.input);
  return { text: uses.length === 0 ? textOf(content) : parsed?.success ? parsed.data.text : undefined, sole };
}

/**
 * The answer's reply when it ends the turn (plain text, or a sole call of the reply tool) and passes the guard: sent
 * once, with the turn's end committed, exactly as the workflow's own final reply step would (deliverFinalReply).
 * Undefined when the answer is anything else, or the send failed for now: the workflow's step then takes it up.
 */
async function replyEndingTurn(
  deps: TurnModelStepDeps,
  call: CallModelInput,
  answer: ModelStep,
  at: ReplyAtOnce,
  step: Step,
): Promise<DeliveryReport | undefined> {
  const { text, sole } = endingReply(answer.content);
  if (text === undefined || !text.trim() || !checkReply(text, { rules: at.rules }).ok) return undefined;
  const { conversationId, rules: _rules, ...final } = at;
  const results = sole ? { toolResults: { callIndex: call.callIndex, results: [] }, replyToolUseId: sole.id } : {};
  const reply = {
    conversationKey: call.conversationKey,
    agentId: call.agentId,
    conversationId,
    turnId: call.turnId,
    replySeq: answer.seq,
    text,
    effectKey: replyEffectKey(call.conversationKey, call.turnId, call.callIndex),
    ...final,
    ...results,
  };
  return deliverFinalReply(deps.model.pool, deps.transports, reply, step).catch(() => undefined);
}

/**
 * The step as the effects after its answer see it: each a first attempt of its own (the model step's retries are not
 * theirs), and not ended by an interrupting message, which cuts the model call only; a worker stopping still ends it.
 */
function uninterrupted(step: Step): Step {
  const stopping = new AbortController();
  const stop = () => step.cancelRequested() || stopping.abort(step.signal.reason);
  if (step.signal.aborted) stop();
  else step.signal.addEventListener('abort', stop, { once: true });
  return { ...step, attempt: 1, signal: stopping.signal, cancelRequested: () => false };
}
