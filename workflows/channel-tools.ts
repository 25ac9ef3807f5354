import {
  CancellationScope,
  ParentClosePolicy,
  getExternalWorkflowHandle,
  patched,
  startChild,
  uuid4,
} from '@temporalio/workflow';
import type { ScheduleToolInput } from '../domain/jobs';
import { cancelDelegate, DELEGATE_WORKFLOW, type DelegateWorkflow } from '../contracts/delegate';
import { repliedEnd, type FinalReply, type TurnEnd } from '../domain/conversation';
import type { HistoryMode } from '../domain/delegation';
import type { ReplyBlocked } from '../domain/delivery';
import { delegateWorkflowId, replyEffectKey } from '../domain/ids';
import { LIMITS } from '../domain/limits';
import type { ToolInputErrors, ToolResultBlock, ToolUseBlock } from '../domain/model';
import type { SecretRules } from '../domain/secret-scan';
import { SA } from '../domain/search-attributes';
import { TOOL, unknownTool } from '../domain/tool-names';
import { replyResult, toolResult } from '../domain/transcript';
import { isServerToolName } from '../domain/tool-servers';
import type { ToolAttempts } from '../contracts/tool-calls';
import type { TurnSteps } from './activities';
import { checkedInput, olderChecks } from './older-checks';
import { runServerTool, type ServerToolContext } from './server-tools';

/** What a channel tool sees of the turn it runs in. */
export interface TurnContext {
  conversationKey: string;
  agentId: string;
  conversationId: string;
  /** The workflow the turn runs in: a person's decision on a tool call goes there. */
  workflowId: string;
  /**
   * Whether the run has passed a patch: Temporal's `patched`, or always true in a workflow whose shape is newer than
   * every patch of a turn (a job's run from JOB_TURN_IN_RUN_PATCH), which then records no marker for them.
   */
  patched: (patchId: string) => boolean;
  turnId: string;
  callIndex: number;
  /** Transcript row of the model call that asked for the tool. */
  stepSeq: number;
  /** Replies blocked by the guard so far in this turn. */
  corrections: number;
  /** The conversation's running delegates (a spawn adds to it). */
  liveDelegates: Set<string>;
  /** The proxies the turn takes its steps through (local activities from TURN_IN_ONE_TASK_PATCH). */
  steps: TurnSteps;
  /** Tool servers' calls: the decisions a person sends, and what ends a wait for one early. */
  serverTools: Pick<ServerToolContext, 'approvals' | 'cancelled'>;
  /** Set while the turn's last step is a reply: its step also commits the turn's end (REPLY_FINISHES_TURN_PATCH). */
  finalReply?: FinalReply;
  /** The tool servers' calls the last model step prepared and ran itself (EFFECTS_IN_MODEL_STEP_PATCH). */
  toolAttempts?: ToolAttempts;
  /** What the last model step found wrong with its calls of Keel's tools; unset in steps recorded before it checked. */
  inputErrors?: ToolInputErrors;
}

export interface ToolOutcome {
  result: ToolResultBlock;
  /** Set when the tool ends the turn. */
  end?: TurnEnd;
  /** The step that ended the turn committed its end too (a final reply). */
  endCommitted?: boolean;
}

type ToolHandler = (call: ToolUseBlock, input: never, turn: TurnContext) => Promise<ToolOutcome>;

/**
 * Replies are checked with the maintained ruleset (gitleaks' rules) from this patch on; a conversation begun before it
 * replays its earlier replies against the seed patterns they passed.
 */
export const SECRET_RULESET_PATCH = 'secret-ruleset-gitleaks';

/** The secret rules a reply is checked with: a conversation begun before SECRET_RULESET_PATCH keeps the seed ones. */
export const replyRules = (isPatched: (patchId: string) => boolean = patched): SecretRules =>
  isPatched(SECRET_RULESET_PATCH) ? 'all' : 'seed';

/**
 * The patch from which the reply guard runs in the delivery's step, before anything is written or sent: a blocked
 * reply comes back as the step's verdict. Runs begun before check it here, as they did.
 */
export const GUARD_IN_DELIVERY_PATCH = 'reply-guard-in-delivery';

/**
 * A reply passes the guard, then the delivery activity. A blocked reply goes back to the model as a tool error,
 * at most LIMITS.guardCorrections times; one more blocked reply ends the turn with nothing sent. The turn's last reply
 * (`finalReply`) also commits the turn's end in its step.
 */
export async function sendReply(toolUseId: string, text: string, turn: TurnContext): Promise<ToolOutcome> {
  const guardInStep = turn.patched(GUARD_IN_DELIVERY_PATCH);
  if (!guardInStep) {
    const checks = olderChecks();
    const verdict = checks.checkReply(text, { rules: replyRules(turn.patched) });
    if (!verdict.ok) {
      const message = checks.guardErrorForModel(verdict);
      return blocked(toolUseId, { message, detail: verdict.detail }, turn);
    }
  }
  const summary = `reply of turn ${turn.turnId}`;
  const reply = {
    conversationKey: turn.conversationKey,
    agentId: turn.agentId,
    conversationId: turn.conversationId,
    turnId: turn.turnId,
    replySeq: turn.stepSeq,
    text,
    effectKey: replyEffectKey(turn.conversationKey, turn.turnId, turn.callIndex),
    ...(guardInStep ? { guard: replyRules(turn.patched) } : {}),
  };
  const { delivery } = turn.steps;
  const final = turn.finalReply;
  // A final reply's step commits the turn's end, which is committed even when the workflow is being cancelled.
  const report = final
    ? await CancellationScope.nonCancellable(() =>
        delivery.deliverFinalReply.executeWithOptions({ summary }, [{ ...reply, ...final }]),
      )
    : await delivery.deliverReply.executeWithOptions({ summary }, [reply]);
  if ('blocked' in report) return blocked(toolUseId, report.blocked, turn);
  return {
    result: replyResult(toolUseId, report.outcome),
    end: repliedEnd(turn.stepSeq, report.outcome),
    ...(final ? { endCommitted: true } : {}),
  };
}

/** A reply the guard blocked: the model reads why, or, past its corrections, the turn ends with nothing sent. */
function blocked(toolUseId: string, verdict: ReplyBlocked['blocked'], turn: TurnContext): ToolOutcome {
  turn.corrections++;
  const result = toolResult(toolUseId, verdict.message, true);
  if (turn.corrections <= LIMITS.guardCorrections) return { result };
  const message = `reply blocked ${turn.corrections} times: ${verdict.detail}`;
  return { result, end: { status: 'error', error: { code: 'reply_blocked', message } } };
}

/**
 * Admission first (every rule, and the claim of the task attempt, in PostgreSQL), then the delegate's workflow as a
 * child that outlives this run (ABANDON): it reports back by signalling the conversation's workflow id.
 */
async function spawnDelegate(
  call: ToolUseBlock,
  input: { task?: number; text?: string; historyMode?: HistoryMode },
  turn: TurnContext,
): Promise<ToolOutcome> {
  const delegateId = uuid4();
  const decision = await turn.steps.store.claimDelegate({
    agentId: turn.agentId,
    conversationKey: turn.conversationKey,
    delegateId,
    ...input,
  });
  if (decision.kind === 'refused') return { result: toolResult(call.id, `not spawned: ${decision.reason}`, true) };
  if (decision.kind === 'existing') {
    return {
      result: toolResult(
        call.id,
        `not spawned again: delegate ${decision.delegateId} is already working on this exact task`,
      ),
    };
  }
  await startChild<DelegateWorkflow>(DELEGATE_WORKFLOW, {
    workflowId: delegateWorkflowId(turn.agentId, delegateId),
    parentClosePolicy: ParentClosePolicy.ABANDON,
    args: [
      {
        agentId: turn.agentId,
        delegateId,
        conversationKey: turn.conversationKey,
        taskNumber: decision.taskNumber,
        wallClockSeconds: decision.wallClockSeconds,
      },
    ],
    typedSearchAttributes: [
      { key: SA.agentId, value: turn.agentId },
      { key: SA.conversationId, value: turn.conversationId },
      { key: SA.kind, value: 'delegate' },
    ],
    memo: {
      agent: turn.agentId,
      conversation: turn.conversationId,
      ...(decision.taskNumber !== null ? { task: decision.taskNumber } : {}),
    },
    staticSummary:
      decision.taskNumber !== null ? `Delegate for task #${decision.taskNumber}` : 'Delegate for an ad-hoc task',
  });
  turn.liveDelegates.add(delegateId);
  const what = decision.taskNumber !== null ? `task #${decision.taskNumber}` : 'the ad-hoc task';
  return {
    result: toolResult(
      call.id,
      `spawned delegate ${delegateId} for ${what}; its result will come back to this conversation`,
    ),
  };
}

async function cancelDelegateCall(
  call: ToolUseBlock,
  input: { delegateId: string; reason: string },
  turn: TurnContext,
): Promise<ToolOutcome> {
  if (!turn.liveDelegates.has(input.delegateId))
    return { result: toolResult(call.id, `no running delegate ${input.delegateId} in this conversation`, true) };
  try {
    const delegate = getExternalWorkflowHandle(delegateWorkflowId(turn.agentId, input.delegateId));
    await delegate.signal(cancelDelegate, { reason: input.reason });
  } catch {
    // It finished meanwhile (its workflow is closed): its outcome is on its way through admission.
    return {
      result: toolResult(call.id, `delegate ${input.delegateId} has already finished; its result will come back`),
    };
  }
  return {
    result: toolResult(call.id, `cancel requested for delegate ${input.delegateId}; its outcome will come back`),
  };
}

/** The agent manages its scheduled jobs through the same functions and rules as the API. */
async function scheduleCall(call: ToolUseBlock, input: ScheduleToolInput, turn: TurnContext): Promise<ToolOutcome> {
  const { text, isError } = await turn.steps.store.scheduleJobs({
    agentId: turn.agentId,
    request: input,
    conversationKey: turn.conversationKey,
  });
  return { result: toolResult(call.id, text, isError) };
}

/** The channel's tool handlers by name. Later capabilities add theirs here and their specs in domain/tools. */
const handlers: Record<string, ToolHandler> = {
  [TOOL.reply]: (call, input: { text: string }, turn) => sendReply(call.id, input.text, turn),
  [TOOL.skip]: (call, input: { reason?: string }) =>
    Promise.resolve({
      result: toolResult(call.id, 'skipped'),
      end: { status: 'skipped', ...(input.reason ? { reason: input.reason } : {}) },
    }),
  [TOOL.spawnDelegate]: spawnDelegate,
  [TOOL.cancelDelegate]: cancelDelegateCall,
  [TOOL.schedule]: scheduleCall,
};

/** The patch after which the schedule tool takes a destination's name only (a Delivery object is refused here). */
export const NAMED_DESTINATIONS_PATCH = 'schedule-delivery-names-only';

const givesDelivery = (call: ToolUseBlock) =>
  call.name === TOOL.schedule && typeof call.input === 'object' && call.input !== null && 'delivery' in call.input;

/** The patch from which a tool server's tool is called; a history recorded before it answered such a name unknown. */
export const SERVER_TOOLS_PATCH = 'tool-servers';

export async function dispatchTool(call: ToolUseBlock, turn: TurnContext): Promise<ToolOutcome> {
  if (isServerToolName(call.name) && turn.patched(SERVER_TOOLS_PATCH)) {
    const source = {
      agentId: turn.agentId,
      origin: 'conversation' as const,
      transcriptKey: turn.conversationKey,
      conversationKey: turn.conversationKey,
      turnId: turn.turnId,
      callIndex: turn.callIndex,
    };
    const attempt = turn.toolAttempts?.[call.id];
    const serverTools = {
      ...turn.serverTools,
      steps: turn.steps,
      source,
      workflowId: turn.workflowId,
      ...(attempt ? { attempt } : {}),
    };
    return { result: await runServerTool(call, serverTools) };
  }
  // A history recorded before the patch parsed a delivery with the old schema; it replays that way.
  if (givesDelivery(call) && !turn.patched(NAMED_DESTINATIONS_PATCH)) {
    const legacy = olderChecks().legacyScheduleInput.safeParse(call.input);
    if (!legacy.success) return { result: toolResult(call.id, `invalid arguments for ${call.name}`, true) };
    return scheduleCall(call, legacy.data, turn);
  }
  const checked = checkedInput(call, turn.inputErrors, Object.keys(handlers));
  if (!checked.ok) return { result: toolResult(call.id, checked.error, true) };
  const handler = handlers[call.name];
  if (!handler) return { result: toolResult(call.id, unknownTool(call.name), true) };
  return handler(call, checked.input as never, turn);
}
