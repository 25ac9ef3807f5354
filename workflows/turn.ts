import { ActivityFailure, ApplicationFailure, CancellationScope, isCancellation } from '@temporalio/workflow';
import { budgetStopOf } from './budget-stop';
import {
  repliedEnd,
  type FinalReply,
  type QueuedMessage,
  type ToolResults,
  type TurnEnd,
  type TurnError,
  type TurnNote,
} from '../domain/conversation';
import { FAILURE } from '../domain/failures';
import { LIMITS } from '../domain/limits';
import type { ToolUseBlock } from '../domain/model';
import { CHANNEL_TOOL_NAMES, TOOL } from '../domain/tool-names';
import { textOf, toolResult, toolUses } from '../domain/transcript';
import { activitySteps, localSteps, store, type Steps, type TurnSteps } from './activities';
import { dispatchTool, replyRules, sendReply, type ToolOutcome, type TurnContext } from './channel-tools';
import type { ToolApprovals } from './server-tools';

/**
 * The patch from which a turn runs in one workflow task: its steps (the model calls, the tools, the reply, the
 * transcript) are local activities, with no round trip to the Temporal server between two of them. What made local
 * steps unsafe here (NO_LOCAL_STEPS_PATCH) is gone with it: a message comes recorded already, by a signal
 * (messageRecorded, services/conversation.ts), so no handler takes a step, and each local step lets the activation's
 * handlers finish before its caller goes on (workflows/activities.ts). Histories begun before keep ordinary
 * activities.
 */
export const TURN_IN_ONE_TASK_PATCH = 'conversation-turn-in-one-task';

/**
 * The patch from which a reply that ends its turn (plain text, or the reply tool called last in its model call) and
 * the turn's end are one step (deliverFinalReply): one hand-over between the SDK and the workflow fewer per turn.
 * Runs begun before deliver, then finish, in two.
 */
export const REPLY_FINISHES_TURN_PATCH = 'conversation-reply-finishes-turn';

/**
 * The patch from which a turn's model step also does what its answer leads to that needs no person
 * (services/turn-model-step.ts): it prepares the tool servers' calls the answer asks for first and runs those that may
 * run at once, or sends a reply that ends the turn, with the turn's end. One hand-over fewer per tool round and per
 * turn. Runs begun before take a step of their own for each, as every run still does for what the model step left.
 */
export const EFFECTS_IN_MODEL_STEP_PATCH = 'conversation-effects-in-model-step';

/** The turn in progress: an interrupting message flags it, and cancels its model call if one is running. */
export class RunningTurn {
  interrupted = false;
  modelCall?: CancellationScope;

  constructor(readonly turnId: string) {}

  interrupt(): void {
    this.interrupted = true;
    this.modelCall?.cancel();
  }
}

/**
 * What a turn needs of the workflow it runs in: the conversation's own workflow, or a job's run, which runs its task
 * as a turn of the job's conversation in its own workflow.
 */
export interface TurnHost {
  conversationKey: string;
  agentId: string;
  conversationId: string;
  /** The workflow a person's decision on a tool call goes to: the one the turn runs in. */
  workflowId: string;
  /** Whether the run has passed a patch of the turn's (TurnContext.patched). */
  patched: (patchId: string) => boolean;
  /** The turn's first model step, taken already with its message (a job's run at once: JOB_RUN_AT_ONCE_PATCH). */
  firstStep?: TurnModelStep;
  /** The conversation's running delegates (a spawn adds to it). */
  liveDelegates: Set<string>;
  approvals: ToolApprovals;
  /** Messages steered into the running turn, read before its next model call. */
  steering: { readonly hasSteered: boolean; takeSteered(): QueuedMessage[] };
  /** The proxies of the turn's PostgreSQL steps before TURN_IN_ONE_TASK_PATCH, asked where they were asked then. */
  olderStore: () => Steps;
  began(turn: RunningTurn, userTurn: boolean): void;
  /** The turn's end is committed. */
  finished(first: QueuedMessage, end: TurnEnd): Promise<void>;
  /** The turn is over, however it ended. */
  ended(): void;
}

/**
 * One turn: model calls, and the tools they ask for, until the turn ends (a reply, a skip, an error, an interrupt)
 * or runs out of model calls. Messages steered into it join its transcript before its next model call.
 */
export async function runTurn(first: QueuedMessage, host: TurnHost): Promise<void> {
  const { conversationKey, agentId, conversationId } = host;
  const turn = new RunningTurn(first.turnId);
  const { turnId } = turn;
  const oneTask = host.patched(TURN_IN_ONE_TASK_PATCH);
  const s: TurnSteps = oneTask ? localSteps : activitySteps;
  // The turn's own PostgreSQL steps; before TURN_IN_ONE_TASK_PATCH, local or not by the earlier patches, asked (db())
  // where they were asked then.
  const record = () => (oneTask ? s.store : host.olderStore());
  host.began(turn, !first.retrigger);
  const ctx: TurnContext = {
    conversationKey,
    agentId,
    conversationId,
    workflowId: host.workflowId,
    patched: host.patched,
    turnId,
    callIndex: 0,
    stepSeq: 0,
    corrections: 0,
    liveDelegates: host.liveDelegates,
    steps: s,
    serverTools: {
      approvals: host.approvals,
      // A newer message ends a wait for a person: the model hears why, and reads the message next.
      cancelled: () =>
        turn.interrupted
          ? 'a newer message interrupted the turn while it waited for approval'
          : host.steering.hasSteered
            ? 'a new message arrived while it waited for approval'
            : undefined,
    },
  };
  const maxCalls = first.retrigger ? LIMITS.modelCallsPerRetriggerTurn : LIMITS.modelCallsPerTurn;
  const relayOf = first.retrigger ? { relayOf: first.retrigger } : {};
  // From REPLY_FINISHES_TURN_PATCH, the step of a reply that ends the turn also commits its end.
  const finalReply = () =>
    oneTask && host.patched(REPLY_FINISHES_TURN_PATCH) ? { modelCalls: ctx.callIndex, ...relayOf } : undefined;
  let pending: { toolResults?: ToolResults; note?: TurnNote } = {};
  // A turn in one workflow task writes its transcript in its model calls' steps: its message with the first.
  let before: BeforeModelCall = {};
  try {
    let throughSeq = 0;
    if (first.retrigger) {
      const retrigger = { conversationKey, turnId, delegateIds: first.retrigger };
      throughSeq = await (oneTask ? s.store : store).startRetrigger(retrigger);
    } else if (oneTask) before = { begin: { messageIds: [first.messageId] } };
    else throughSeq = await record().startTurn({ conversationKey, turnId, messageIds: [first.messageId] });
    // A model step that went on with the turn's next model call itself, once all the tool calls it asked for ran; or
    // the turn's first, which began it.
    let chained: ModelStep | undefined = host.firstStep;
    if (chained) before = {};
    for (;;) {
      let step: ModelStep | { error: TurnEnd };
      // Tool results the step was to write: the turn's end writes them (once) if the step did not get to.
      let written: ToolResults | undefined;
      if (chained) {
        // Taken whatever came meanwhile, as it is committed: an interrupt or a steered message is read next.
        ctx.callIndex++;
        step = chained;
        written = pending.toolResults;
        chained = undefined;
        pending = {};
      } else {
        if (turn.interrupted) {
          const { begin } = before;
          // Begun before it ends, so that its message is in the transcript; unless it ended already.
          if (begin && (await s.store.beginTurn({ conversationKey, turnId, ...begin })) === null) return;
          return await finish(interrupted(), pending.toolResults);
        }
        if (ctx.callIndex >= maxCalls) {
          const message = `the turn used its ${maxCalls} model calls without replying`;
          return await finish({ status: 'error', error: { code: 'max_model_calls', message } }, pending.toolResults);
        }
        const steered = host.steering.takeSteered();
        if (pending.toolResults || pending.note || steered.length > 0) {
          const append = { toolResults: pending.toolResults, note: pending.note, steered };
          if (oneTask) before = { ...before, append };
          else throughSeq = await record().appendToTranscript({ conversationKey, turnId, ...append });
          pending = {};
        }

        ctx.callIndex++;
        const call = {
          conversationKey,
          agentId,
          turnId,
          callIndex: ctx.callIndex,
          throughSeq,
          toolNames: CHANNEL_TOOL_NAMES,
          // A decision on a tool call goes to the workflow the turn runs in (a job's run, not its conversation).
          ...(host.workflowId !== conversationKey ? { workflowId: host.workflowId } : {}),
        };
        const final = oneTask && host.patched(EFFECTS_IN_MODEL_STEP_PATCH) ? finalReply() : undefined;
        const replyAtOnce = final && { ...final, conversationId, rules: replyRules(host.patched) };
        const effects = replyAtOnce ? { runTools: true, replyAtOnce, upToCall: maxCalls } : {};
        step = await callModel(turn, s, call, before, effects);
        written = before.append?.toolResults;
        before = {};
      }
      // A message handed over again after its turn ended: nothing more to do.
      if ('ended' in step) return;
      if ('error' in step) return await finish(step.error, written);
      throughSeq = ctx.stepSeq = step.seq;
      // The model step sent the reply that ends the turn, and committed the end.
      if (step.replied) return await finish(repliedEnd(step.seq, step.replied.outcome), undefined, true);
      ctx.toolAttempts = step.toolAttempts;
      ctx.inputErrors = step.inputErrors;

      const calls = toolUses(step.content);
      if (calls.length === 0) {
        // Plain text is a delivery path too, through the same guard.
        const text = textOf(step.content);
        if (!text.trim()) return await finish({ status: 'skipped', reason: 'the model answered nothing' }, undefined);
        ctx.finalReply = finalReply();
        const outcome = await sendReply(`text-${ctx.callIndex}`, text, ctx).finally(() => (ctx.finalReply = undefined));
        if (outcome.end) return await finish(outcome.end, undefined, outcome.endCommitted);
        pending = { note: { callIndex: ctx.callIndex, text: outcome.result.content } };
        continue;
      }
      const results = await runTools(calls, ctx, finalReply);
      pending = { toolResults: { callIndex: ctx.callIndex, results: results.map((r) => r.result) } };
      const ended = results.find((r) => r.end);
      if (ended?.end) return await finish(ended.end, pending.toolResults, ended.endCommitted);
      chained = step.next;
    }
  } finally {
    host.ended();
  }

  async function finish(end: TurnEnd, toolResults: ToolResults | undefined, committed = false): Promise<void> {
    // Committed even when the workflow is being cancelled: the turn's end is the record users read.
    if (!committed)
      await CancellationScope.nonCancellable(() =>
        record().finishTurn({ conversationKey, turnId, end, modelCalls: ctx.callIndex, toolResults, ...relayOf }),
      );
    await host.finished(first, end);
  }
}

function interrupted(): TurnEnd {
  return { status: 'interrupted', error: { code: 'interrupted', message: 'interrupted by a newer message' } };
}

type ModelCallInput = Parameters<TurnSteps['model']['callModel']>[0];
type BeforeModelCall = Parameters<TurnSteps['model']['callTurnModel']>[0]['before'];
type ModelStep = Awaited<ReturnType<TurnSteps['model']['callTurnModel']>>;
/** A turn's model step as its step answers it, with what it did itself. */
export type TurnModelStep = ModelStep;
type ModelStepEffects = Pick<
  Parameters<TurnSteps['model']['callTurnModel']>[0],
  'runTools' | 'replyAtOnce' | 'upToCall'
>;

/**
 * A model call that an interrupting message can cancel; a failure that retries cannot mend ends the turn. A turn in
 * one workflow task writes its transcript (`before`) in the same step.
 */
async function callModel(
  turn: RunningTurn,
  s: TurnSteps,
  input: ModelCallInput,
  before: BeforeModelCall,
  effects: ModelStepEffects,
): Promise<ModelStep | { error: TurnEnd }> {
  // An interrupt that arrived while the transcript was being written stops the turn before its next model call.
  if (turn.interrupted) return { error: interrupted() };
  const scope = new CancellationScope();
  turn.modelCall = scope;
  const summary = `model call ${input.callIndex} of turn ${input.turnId}`;
  try {
    const turnInput = { ...input, before, ...effects };
    const call = (): Promise<ModelStep> =>
      s.local
        ? s.model.callTurnModel.executeWithOptions({ summary }, [turnInput])
        : s.model.callModel.executeWithOptions({ summary }, [input]);
    return await scope.run(call);
  } catch (err) {
    // Interrupted: whether the call acknowledged its cancellation or timed out doing so (a worker gone meanwhile).
    if (turn.interrupted || isCancellation(err)) return { error: interrupted() };
    const error = turnErrorOf(err);
    return {
      error: error.code === 'budget_exhausted' ? { status: 'budget_exhausted', error } : { status: 'error', error },
    };
  } finally {
    turn.modelCall = undefined;
  }
}

/**
 * The tools one model call asked for, in order; once one has ended the turn, the rest are not run. A reply asked for
 * last is the turn's last step when it is sent: with `finalReply`, its step commits the turn's end and these results.
 */
async function runTools(
  calls: ToolUseBlock[],
  ctx: TurnContext,
  finalReply: () => Omit<FinalReply, 'toolResults' | 'replyToolUseId'> | undefined,
): Promise<ToolOutcome[]> {
  const results: ToolOutcome[] = [];
  for (const [i, call] of calls.entries()) {
    if (results.some((r) => r.end)) {
      results.push(notRun(call));
      continue;
    }
    const final = i === calls.length - 1 && call.name === TOOL.reply ? finalReply() : undefined;
    const toolResults = { callIndex: ctx.callIndex, results: results.map((r) => r.result) };
    ctx.finalReply = final && { ...final, toolResults, replyToolUseId: call.id };
    try {
      results.push(await dispatchTool(call, ctx));
    } finally {
      ctx.finalReply = undefined;
    }
  }
  return results;
}

function notRun(call: ToolUseBlock): ToolOutcome {
  return { result: toolResult(call.id, 'not run: the turn had already ended', true) };
}

function turnErrorOf(err: unknown): TurnError {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  const message = cause instanceof Error ? cause.message : String(cause);
  if (budgetStopOf(err) !== undefined) return { code: 'budget_exhausted', message };
  const isRequestError = cause instanceof ApplicationFailure && cause.type === FAILURE.modelRequest;
  return { code: isRequestError ? 'model_request' : 'model_error', message };
}
