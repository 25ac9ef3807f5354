import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  makeContinueAsNewFunc,
  patched,
  setHandler,
  sleep,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { Mutex } from 'async-mutex';
import { budgetStopOf } from './budget-stop';
import { repliedEnd, type FinalReply, type ToolResults, type TurnNote } from '../domain/conversation';
import {
  delegateFinished,
  IDLE_TIMER_SUMMARY,
  messageRecorded,
  stateQuery,
  submitMessage,
} from '../contracts/conversation';
import { jobTurnEnded } from '../contracts/job-run';
import {
  CONVERSATION,
  type ConversationInput,
  type QueuedMessage,
  type SubmitResult,
  type TurnEnd,
  type TurnError,
} from '../domain/conversation';
import { FAILURE } from '../domain/failures';
import { conversationWorkflowId } from '../domain/ids';
import { LIMITS } from '../domain/limits';
import type { ToolUseBlock } from '../domain/model';
import type { InboundMessage } from '../domain/messages';
import { SA } from '../domain/search-attributes';
import { CHANNEL_TOOL_NAMES, TOOL } from '../domain/tool-names';
import { DELEGATION } from '../domain/delegate-lifecycle';
import { textOf, toolResult, toolUses } from '../domain/transcript';
import { activitySteps, localSteps, steps, store, type TurnSteps } from './activities';
import { dispatchTool, replyRules, sendReply, type ToolOutcome, type TurnContext } from './channel-tools';
import { ConversationQueue } from './conversation-queue';
import { ToolApprovals } from './server-tools';
import { decideToolCall } from '../contracts/tool-calls';
import type { ToolCallDecision } from '../domain/tool-calls';
import { DelegateRelay } from './relay';

/** The turn in progress: an interrupting message flags it, and cancels its model call if one is running. */
class RunningTurn {
  interrupted = false;
  modelCall?: CancellationScope;

  constructor(readonly turnId: string) {}

  interrupt(): void {
    this.interrupted = true;
    this.modelCall?.cancel();
  }
}

/**
 * The shape of conversations since the scale work: the main loop's short PostgreSQL steps run as local activities,
 * the workflow closes when idle, and a turn's end is signalled to the job run that asked for it. Runs begun before
 * keep the older shape until they reach this patch's first check.
 */
export const IDLE_CLOSE_PATCH = 'conversation-idle-close-local-steps';

/**
 * The patch after which the conversation's PostgreSQL steps are ordinary activities again, never local ones. A local
 * activity still running when the submitMessage handler completes its update (the first workflow task heartbeated
 * without the activity's marker, the worker was killed, another ran it again beside the handler's acceptMessage) is
 * resolved in the same activation as acceptMessage on replay, but in an activation of its own in the live run: the
 * loop's next command then overtakes the update's completion and the run's every later task fails with
 * "[TMPRL1100] Activity machine does not handle this event: WorkflowExecutionUpdateCompleted" (issue 24; a harsher
 * soak lost a job run to it). Ordinary activities resolve from history events, in one order live and on replay.
 * Runs begun before keep their local steps.
 */
export const NO_LOCAL_STEPS_PATCH = 'conversation-steps-as-activities';

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
 * The patch from which a run takes up the turns PostgreSQL has open in their order of acceptance. Before it, a turn
 * whose message was recorded after others but not yet handed over went ahead of them (a burst of messages behind a
 * run's start answered its last message first).
 */
export const OPEN_TURNS_IN_ORDER_PATCH = 'conversation-open-turns-in-order';

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

/**
 * One workflow per conversation while it has work. Messages arrive recorded, by the `messageRecorded` signal
 * (signal-with-start; runs begun before took the `submitMessage` Update); each becomes a turn of at most five model
 * calls whose transcript lives in PostgreSQL. The workflow carries only small state, so its history grows by a
 * constant per turn, and continues as new when Temporal suggests it. With
 * nothing to do for `idleMs` (no queued message, no delegate out, no result to relay) it closes: the next message
 * starts a new run, and an idle conversation holds nothing in Temporal or on a worker.
 *
 * Its state is two pieces beside it: the queue of turns (conversation-queue.ts) and the relay of delegates' results
 * (relay.ts). The loop below waits for work, then does the most urgent thing: admit delegates' outcomes, relay
 * admitted results, or run the next turn.
 */
export async function conversationWorkflow(input: ConversationInput): Promise<void> {
  const { agentId, conversationId } = input;
  const conversationKey = conversationWorkflowId(agentId, conversationId);
  const idleMs = input.idleMs ?? CONVERSATION.idleCloseMs;
  // Asked at each point where the shapes differ; once true (a marker in history), true for the rest of the run.
  const lean = () => patched(IDLE_CLOSE_PATCH);
  const db = () => (lean() && !patched(NO_LOCAL_STEPS_PATCH) ? steps : store);
  const turns = new ConversationQueue(input.carried?.queue);
  const relay = new DelegateRelay(input.carried, () => sleep(DELEGATION.retriggerDebounceMs));
  let turnsCompleted = input.carried?.turnsCompleted ?? 0;
  let current: RunningTurn | undefined;
  let lastOutcome: string | undefined;
  // Messages are accepted one at a time, so the queue's order is the order of acceptance.
  const accepting = new Mutex();
  const approvals = new ToolApprovals();

  setHandler(stateQuery, () => ({
    busy: current !== undefined,
    ...(current ? { currentTurnId: current.turnId } : {}),
    queued: turns.size,
    liveDelegates: [...relay.live],
    turnsCompleted,
  }));
  setHandler(delegateFinished, (claim) => relay.claim(claim));
  setHandler(decideToolCall, (d) => approvals.decide(d), {
    validator: (d: ToolCallDecision) => approvals.validate(d),
    description: "A person's decision on a tool call that waits for approval.",
  });
  setHandler(messageRecorded, (message) => place(message));
  // The API validated the message before it sent the update (runs begun before the API recorded messages).
  setHandler(submitMessage, (message) => accepting.runExclusive(() => accept(message)), {
    description: 'Submit an inbound message; idempotent by messageId.',
  });

  if (!input.carried) {
    // A run that did not inherit a queue (the first, or one started after a run was terminated) takes up the turns
    // PostgreSQL still has open, oldest first, so that no accepted message is left unanswered.
    turns.takeUp(await db().openTurns({ conversationKey }), () => patched(OPEN_TURNS_IN_ORDER_PATCH));
  }
  // After continue-as-new (or a fresh start) the outcomes committed meanwhile are reconciled from PostgreSQL.
  await admitOutcomes(true, !input.carried);

  while (!workflowInfo().continueAsNewSuggested) {
    const woken = await waitForWork();
    if (woken === 'idle') {
      if (await closesIdle()) return;
      continue;
    }
    const reconcileDue = woken === 'reconcile';
    if (reconcileDue || relay.hasClaims) {
      await admitOutcomes(reconcileDue);
      continue;
    }
    if (relay.relayDue) {
      await relayResults();
      continue;
    }
    const next = turns.next();
    if (!next) break;
    await runTurn(next);
    turnsCompleted++;
    // Each turn end reconciles too, while delegates are out.
    if (relay.live.size > 0) await admitOutcomes(true);
  }

  // Let accepted messages finish being recorded, then hand the queue to the next run.
  await condition(allHandlersFinished);
  // The next run starts on the current build (servers after 1.29 honour this; 1.29 keeps the run's: docs/deploy.md).
  await makeContinueAsNewFunc<typeof conversationWorkflow>({ initialVersioningBehavior: 'AUTO_UPGRADE' })({
    agentId,
    conversationId,
    ...(input.idleMs ? { idleMs: input.idleMs } : {}),
    carried: { queue: turns.carried(), turnsCompleted, ...relay.carried() },
  });

  /**
   * Queues the turn of a recorded message, steers it into the running turn, or interrupts: a signal's handler, which
   * emits no command beside the turn's local steps. A message handed over again finds its turn taken.
   */
  function place(message: QueuedMessage): void {
    if (turns.has(message.turnId)) return;
    if (turns.place(message, current !== undefined).interrupts) current?.interrupt();
  }

  /** Messages of runs begun before the API recorded them: recorded here, then placed. */
  async function accept(message: InboundMessage): Promise<SubmitResult> {
    const { messageId } = message;
    // An ordinary activity, never a local one: handlers run beside the main loop, and local activities awaited by two
    // coroutines at once may resolve in another order on replay than they did at first. Its input, with the turn's id
    // drawn here, is in history before it runs: a retried attempt that finds its own row is the same acceptance.
    const turnId = uuid4();
    const accepted = await store.acceptMessage({
      conversationKey,
      agentId,
      conversationId,
      message,
      turnId,
      startsTurn: true,
    });
    if (accepted.duplicate) return { messageId, turnId: accepted.turnId, status: 'accepted', duplicate: true };
    const notify = message.notify ? { notify: message.notify } : {};
    const placed = turns.place({ messageId, turnId, mode: message.mode, ...notify }, current !== undefined);
    if (placed.interrupts) current?.interrupt();
    return { messageId, turnId, status: placed.status, duplicate: false };
  }

  /**
   * Waits until there is something to do. While delegates run it also wakes on an interval, to catch up with a
   * completion signal that was lost (`reconcile`: the outcomes are read from PostgreSQL). Otherwise it waits at most
   * `idleMs`, then answers `idle`.
   */
  async function waitForWork(): Promise<'work' | 'reconcile' | 'idle'> {
    const wake = () => turns.length > 0 || relay.hasClaims || relay.relayDue || workflowInfo().continueAsNewSuggested;
    if (relay.live.size > 0) {
      const woken = await condition(wake, DELEGATION.reconcileIntervalMs, { summary: 'reconcile delegates' });
      return woken ? 'work' : 'reconcile';
    }
    if (!lean()) {
      await condition(wake);
      return 'work';
    }
    return (await condition(wake, idleMs, { summary: IDLE_TIMER_SUMMARY })) ? 'work' : 'idle';
  }

  /** Nothing queued or running, no delegate out, no result waiting for its relay. */
  function idle(): boolean {
    return current === undefined && turns.size === 0 && relay.settled;
  }

  /**
   * Closes the run when it is still idle once the messages being accepted have been recorded. A message that reaches
   * Temporal after this workflow task began is not lost: Temporal either hands it to this run (which then stays) or
   * aborts it as closed and retries the update-with-start on a new run (services/conversation.ts).
   */
  async function closesIdle(): Promise<boolean> {
    if (!idle()) return false;
    await db().conversationIdle({ conversationKey, runId: workflowInfo().runId, idleMs });
    await condition(allHandlersFinished);
    return idle();
  }

  /** Examines completion claims (and, reconciling, every committed outcome not yet admitted); admits each once. */
  async function admitOutcomes(reconcile: boolean, resume = false): Promise<void> {
    const signals = relay.takeClaims();
    // An ordinary activity: its batch token is drawn by the workflow, so its effects must not outlive a discarded task.
    const { admitted, live } = await store.admitDelegateOutcomes({
      conversationKey,
      batch: uuid4(),
      signals,
      reconcile,
      resume,
    });
    relay.admitted(admitted, live);
  }

  /** One retrigger turn for the admitted results, at most three per user message; past that, notes. */
  async function relayResults(): Promise<void> {
    const due = relay.takeDue();
    if (!due) return;
    if (due.as === 'note') {
      await store.noteBackgroundResults({ conversationKey, delegateIds: due.delegateIds });
      return;
    }
    const turnId = uuid4();
    turns.enqueue({ messageId: `retrigger:${turnId}`, turnId, mode: 'queue', retrigger: due.delegateIds }, 'back');
  }

  /**
   * One turn: model calls, and the tools they ask for, until the turn ends (a reply, a skip, an error, an interrupt)
   * or runs out of model calls. Messages steered into it join its transcript before its next model call.
   */
  async function runTurn(first: QueuedMessage): Promise<void> {
    const turn = new RunningTurn(first.turnId);
    const { turnId } = turn;
    const oneTask = patched(TURN_IN_ONE_TASK_PATCH);
    const s: TurnSteps = oneTask ? localSteps : activitySteps;
    // The turn's own PostgreSQL steps; before TURN_IN_ONE_TASK_PATCH, local or not by the earlier patches, asked (db())
    // where they were asked then.
    const record = () => (oneTask ? s.store : db());
    current = turn;
    const ctx: TurnContext = {
      conversationKey,
      agentId,
      conversationId,
      turnId,
      callIndex: 0,
      stepSeq: 0,
      corrections: 0,
      liveDelegates: relay.live,
      steps: s,
      serverTools: {
        approvals,
        // A newer message ends a wait for a person: the model hears why, and reads the message next.
        cancelled: () =>
          turn.interrupted
            ? 'a newer message interrupted the turn while it waited for approval'
            : turns.hasSteered
              ? 'a new message arrived while it waited for approval'
              : undefined,
      },
    };
    const maxCalls = first.retrigger ? LIMITS.modelCallsPerRetriggerTurn : LIMITS.modelCallsPerTurn;
    const relayOf = first.retrigger ? { relayOf: first.retrigger } : {};
    // From REPLY_FINISHES_TURN_PATCH, the step of a reply that ends the turn also commits its end.
    const finalReply = () =>
      oneTask && patched(REPLY_FINISHES_TURN_PATCH) ? { modelCalls: ctx.callIndex, ...relayOf } : undefined;
    if (!first.retrigger) relay.userTurnStarted();
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
      // A model step that went on with the turn's next model call itself, once all the tool calls it asked for ran.
      let chained: ModelStep | undefined;
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
          const steered = turns.takeSteered();
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
          };
          const final = oneTask && patched(EFFECTS_IN_MODEL_STEP_PATCH) ? finalReply() : undefined;
          const replyAtOnce = final && { ...final, conversationId, rules: replyRules() };
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
          const outcome = await sendReply(`text-${ctx.callIndex}`, text, ctx).finally(
            () => (ctx.finalReply = undefined),
          );
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
      current = undefined;
      turns.endTurn();
    }

    async function finish(end: TurnEnd, toolResults: ToolResults | undefined, committed = false): Promise<void> {
      // Committed even when the workflow is being cancelled: the turn's end is the record users read.
      if (!committed)
        await CancellationScope.nonCancellable(() =>
          record().finishTurn({ conversationKey, turnId, end, modelCalls: ctx.callIndex, toolResults, ...relayOf }),
        );
      // A job's run waits for this turn: told once the end is committed (it reads the end from PostgreSQL).
      if (first.notify) await tellTurnEnded(first.notify, first.messageId);
      if (lastOutcome !== end.status) {
        lastOutcome = end.status;
        upsertSearchAttributes([{ key: SA.outcome, value: end.status }]);
      }
    }
  }
}

/** The run may be gone (cancelled, or timed out): it reads the committed turn on its own timer then. */
async function tellTurnEnded(workflowId: string, messageId: string): Promise<void> {
  try {
    await getExternalWorkflowHandle(workflowId).signal(jobTurnEnded, { messageId });
  } catch {
    // Nothing to tell: a closed run no longer waits.
  }
}

function interrupted(): TurnEnd {
  return { status: 'interrupted', error: { code: 'interrupted', message: 'interrupted by a newer message' } };
}

type ModelCallInput = Parameters<TurnSteps['model']['callModel']>[0];
type BeforeModelCall = Parameters<TurnSteps['model']['callTurnModel']>[0]['before'];
type ModelStep = Awaited<ReturnType<TurnSteps['model']['callTurnModel']>>;
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
