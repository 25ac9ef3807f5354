import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  isCancellation,
  setHandler,
  sleep,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { Mutex } from 'async-mutex';
import type { ToolResults, TurnNote } from '../activities/conversation';
import type { ConversationInput, ConversationState, QueuedMessage, SubmitResult, TurnEnd, TurnError } from '../domain/conversation';
import { FAILURE } from '../domain/failures';
import { conversationWorkflowId } from '../domain/ids';
import { LIMITS } from '../domain/limits';
import { assertValidInbound, type InboundMessage } from '../domain/messages';
import { SA } from '../domain/search-attributes';
import { CHANNEL_TOOL_NAMES } from '../domain/tools';
import { DELEGATION, type DelegateFinished } from '../domain/delegation';
import { textOf, toolUses } from '../domain/transcript';
import { model, store } from './activities';
import { dispatchTool, sendReply, type ToolOutcome, type TurnContext } from './channel-tools';

export const submitMessage = defineUpdate<SubmitResult, [InboundMessage]>('submitMessage');
export const stateQuery = defineQuery<ConversationState>('state');
/** Sent by a delegate after its outcome is committed; only a claim: admission re-reads the committed row. */
export const delegateFinished = defineSignal<[DelegateFinished]>('delegateFinished');

interface RunningTurn {
  turnId: string;
  interrupted: boolean;
  modelCall?: CancellationScope;
}

/**
 * One long-lived workflow per conversation. Messages arrive by the `submitMessage` Update (update-with-start);
 * each becomes a turn of at most five model calls whose transcript lives in PostgreSQL. The workflow carries only
 * small state, so its history grows by a constant per turn, and continues as new when Temporal suggests it.
 */
export async function conversationWorkflow(input: ConversationInput): Promise<void> {
  const { agentId, conversationId } = input;
  const conversationKey = conversationWorkflowId(agentId, conversationId);
  const queue: QueuedMessage[] = [...(input.carried?.queue ?? [])];
  let steered: QueuedMessage[] = [];
  let turnsCompleted = input.carried?.turnsCompleted ?? 0;
  let current: RunningTurn | undefined;
  let lastOutcome: string | undefined;
  // Delegation: delegates still running, their completion claims not yet examined, admitted results not yet relayed.
  const liveDelegates = new Set<string>(input.carried?.liveDelegates ?? []);
  const finishedClaims: DelegateFinished[] = [];
  let pendingResults: string[] = [...(input.carried?.pendingResults ?? [])];
  let retriggers = input.carried?.retriggers ?? 0;
  let relayDue = pendingResults.length > 0;
  let relayArmed = false;
  // Messages are accepted one at a time, so the queue's order is the order of acceptance.
  const accepting = new Mutex();
  // Every turn this run has queued, so that a turn reaches the queue once whichever path brings it (a message's
  // acceptance, or open turns taken up from PostgreSQL) and however their results interleave.
  const taken = new Set<string>(queue.map((q) => q.turnId));
  const enqueue = (entry: QueuedMessage, at: 'back' | 'front' | 'after-interrupts'): void => {
    if (taken.has(entry.turnId)) return;
    taken.add(entry.turnId);
    if (at === 'back') queue.push(entry);
    else if (at === 'front') queue.unshift(entry);
    else {
      const firstOther = queue.findIndex((q) => q.mode !== 'interrupt');
      queue.splice(firstOther < 0 ? queue.length : firstOther, 0, entry);
    }
  };

  setHandler(stateQuery, () => ({
    busy: current !== undefined,
    ...(current ? { currentTurnId: current.turnId } : {}),
    queued: queue.length + steered.length,
    liveDelegates: [...liveDelegates],
    turnsCompleted,
  }));
  setHandler(delegateFinished, (claim) => {
    finishedClaims.push(claim);
  });

  setHandler(
    submitMessage,
    (message) =>
      accepting.runExclusive(async (): Promise<SubmitResult> => {
        const turnId = uuid4();
        const accepted = await store.acceptMessage({ conversationKey, agentId, conversationId, message, turnId, startsTurn: true });
        if (accepted.duplicate) return { messageId: message.messageId, turnId: accepted.turnId, status: 'accepted', duplicate: true };
        const entry: QueuedMessage = { messageId: message.messageId, turnId, mode: message.mode };
        // Its own turn may already be queued, taken up from PostgreSQL by a run that was just starting.
        const idle = current === undefined && queue.every((q) => q.turnId === turnId);
        if (current && message.mode === 'steer' && !taken.has(turnId)) {
          taken.add(turnId);
          steered.push(entry);
          return { messageId: message.messageId, turnId, status: 'accepted', duplicate: false };
        }
        if (current && message.mode === 'interrupt') {
          // Next in line, behind interrupts that came earlier.
          enqueue(entry, 'after-interrupts');
          current.interrupted = true;
          current.modelCall?.cancel();
          return { messageId: message.messageId, turnId, status: 'queued', duplicate: false };
        }
        enqueue(entry, 'back');
        return { messageId: message.messageId, turnId, status: idle ? 'accepted' : 'queued', duplicate: false };
      }),
    { validator: assertValidInbound, description: 'Submit an inbound message; idempotent by messageId.' },
  );

  if (!input.carried) {
    // A run that did not inherit a queue (the first, or one started after a run was terminated) takes up the turns
    // PostgreSQL still has open, oldest first, so that no accepted message is left unanswered.
    const open = await store.openTurns({ conversationKey });
    for (const t of open.reverse()) enqueue(t, 'front');
  }
  // After continue-as-new (or a fresh start) the outcomes committed meanwhile are reconciled from PostgreSQL.
  await admitOutcomes(true, !input.carried);

  while (!workflowInfo().continueAsNewSuggested) {
    const wake = () => queue.length > 0 || finishedClaims.length > 0 || relayDue || workflowInfo().continueAsNewSuggested;
    // While delegates run, a lost completion signal is caught up with on an interval (condition answers false then).
    const reconcileDue = liveDelegates.size > 0 ? (await condition(wake, DELEGATION.reconcileIntervalMs, { summary: 'reconcile delegates' })) === false : (await condition(wake), false);
    if (reconcileDue || finishedClaims.length > 0) {
      await admitOutcomes(reconcileDue);
      continue;
    }
    if (relayDue) {
      await relayResults();
      continue;
    }
    const next = queue.shift();
    if (!next) break;
    await runTurn(next);
    turnsCompleted++;
    // Each turn end reconciles too, while delegates are out.
    if (liveDelegates.size > 0) await admitOutcomes(true);
  }

  // Let accepted messages finish being recorded, then hand the queue to the next run.
  await condition(allHandlersFinished);
  await continueAsNew<typeof conversationWorkflow>({
    agentId,
    conversationId,
    carried: { queue, turnsCompleted, liveDelegates: [...liveDelegates], pendingResults, retriggers },
  });

  /** Examines completion claims (and, reconciling, every committed outcome not yet admitted); admits each once. */
  async function admitOutcomes(reconcile: boolean, resume = false): Promise<void> {
    const signals = finishedClaims.splice(0);
    const { admitted, live } = await store.admitDelegateOutcomes({ conversationKey, batch: uuid4(), signals, reconcile, resume });
    liveDelegates.clear();
    for (const id of live) liveDelegates.add(id);
    const fresh = admitted.filter((id) => !pendingResults.includes(id));
    if (fresh.length === 0) return;
    pendingResults.push(...fresh);
    // Results that arrive together are relayed together: wait a moment for company.
    if (!relayArmed) {
      relayArmed = true;
      void sleep(DELEGATION.retriggerDebounceMs).then(() => {
        relayArmed = false;
        relayDue = true;
      });
    }
  }

  /** One retrigger turn for the admitted results, at most three per user message; past that, notes. */
  async function relayResults(): Promise<void> {
    relayDue = false;
    const delegateIds = pendingResults;
    pendingResults = [];
    if (delegateIds.length === 0) return;
    if (retriggers >= DELEGATION.retriggersPerUserMessage) {
      await store.noteBackgroundResults({ conversationKey, delegateIds });
      return;
    }
    retriggers++;
    const turnId = uuid4();
    enqueue({ messageId: `retrigger:${turnId}`, turnId, mode: 'queue', retrigger: delegateIds }, 'back');
  }

  async function runTurn(first: QueuedMessage): Promise<void> {
    const turn: RunningTurn = { turnId: first.turnId, interrupted: false };
    current = turn;
    const ctx: TurnContext = { conversationKey, agentId, conversationId, turnId: turn.turnId, callIndex: 0, stepSeq: 0, corrections: 0, liveDelegates };
    const maxCalls = first.retrigger ? LIMITS.modelCallsPerRetriggerTurn : LIMITS.modelCallsPerTurn;
    if (!first.retrigger) retriggers = 0;
    let throughSeq = first.retrigger
      ? await store.startRetrigger({ conversationKey, turnId: turn.turnId, delegateIds: first.retrigger })
      : await store.startTurn({ conversationKey, turnId: turn.turnId, messageIds: [first.messageId] });
    let pending: { toolResults?: ToolResults; note?: TurnNote } = {};
    try {
      for (;;) {
        if (turn.interrupted) return await finish(interrupted(), pending.toolResults);
        if (ctx.callIndex >= maxCalls) {
          return await finish({ status: 'error', error: { code: 'max_model_calls', message: `the turn used its ${maxCalls} model calls without replying` } }, pending.toolResults);
        }
        const steer = steered;
        steered = [];
        if (pending.toolResults || pending.note || steer.length > 0) {
          throughSeq = await store.appendToTranscript({
            conversationKey,
            turnId: turn.turnId,
            toolResults: pending.toolResults,
            note: pending.note,
            steered: steer,
          });
          pending = {};
        }

        ctx.callIndex++;
        const step = await callModel(turn, { conversationKey, agentId, turnId: turn.turnId, callIndex: ctx.callIndex, throughSeq, toolNames: CHANNEL_TOOL_NAMES });
        if ('error' in step) return await finish(step.error, undefined);
        throughSeq = ctx.stepSeq = step.seq;

        const calls = toolUses(step.content);
        if (calls.length === 0) {
          // Plain text is a delivery path too, through the same guard.
          const text = textOf(step.content);
          if (!text.trim()) return await finish({ status: 'skipped', reason: 'the model answered nothing' }, undefined);
          const outcome = await sendReply(`text-${ctx.callIndex}`, text, ctx);
          if (outcome.end) return await finish(outcome.end, undefined);
          pending = { note: { callIndex: ctx.callIndex, text: outcome.result.content } };
          continue;
        }
        const results: ToolOutcome[] = [];
        for (const call of calls) {
          const ended = results.find((r) => r.end);
          results.push(ended ? { result: { type: 'tool_result', tool_use_id: call.id, content: 'not run: the turn had already ended', is_error: true } } : await dispatchTool(call, ctx));
        }
        pending = { toolResults: { callIndex: ctx.callIndex, results: results.map((r) => r.result) } };
        const end = results.find((r) => r.end)?.end;
        if (end) return await finish(end, pending.toolResults);
      }
    } finally {
      current = undefined;
      // Steered messages that arrived after the turn's last model call get a turn of their own, first.
      queue.unshift(...steered);
      steered = [];
    }

    async function finish(end: TurnEnd, toolResults: ToolResults | undefined): Promise<void> {
      // Committed even when the workflow is being cancelled: the turn's end is the record users read.
      await CancellationScope.nonCancellable(() =>
        store.finishTurn({ conversationKey, turnId: turn.turnId, end, modelCalls: ctx.callIndex, toolResults, ...(first.retrigger ? { relayOf: first.retrigger } : {}) }),
      );
      if (lastOutcome !== end.status) {
        lastOutcome = end.status;
        upsertSearchAttributes([{ key: SA.outcome, value: end.status }]);
      }
    }
  }
}

function interrupted(): TurnEnd {
  return { status: 'interrupted', error: { code: 'interrupted', message: 'interrupted by a newer message' } };
}

/** A model call that an interrupting message can cancel; a failure that retries cannot mend ends the turn. */
async function callModel(turn: RunningTurn, input: Parameters<typeof model.callModel>[0]): Promise<Awaited<ReturnType<typeof model.callModel>> | { error: TurnEnd }> {
  // An interrupt that arrived while the transcript was being written stops the turn before its next model call.
  if (turn.interrupted) return { error: interrupted() };
  const scope = new CancellationScope();
  turn.modelCall = scope;
  try {
    return await scope.run(() => model.callModel.executeWithOptions({ summary: `model call ${input.callIndex} of turn ${input.turnId}` }, [input]));
  } catch (err) {
    // Interrupted: whether the call acknowledged its cancellation or timed out doing so (a worker gone meanwhile).
    if (turn.interrupted || isCancellation(err)) return { error: interrupted() };
    return { error: { status: 'error', error: turnErrorOf(err) } };
  } finally {
    turn.modelCall = undefined;
  }
}

function turnErrorOf(err: unknown): TurnError {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  const message = cause instanceof Error ? cause.message : String(cause);
  if (cause instanceof ApplicationFailure && cause.type === FAILURE.modelRequest) return { code: 'model_request', message };
  return { code: 'model_error', message };
}
