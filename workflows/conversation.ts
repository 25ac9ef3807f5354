import {
  allHandlersFinished,
  condition,
  getExternalWorkflowHandle,
  makeContinueAsNewFunc,
  patched,
  setHandler,
  sleep,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { Mutex } from 'async-mutex';
import {
  delegateFinished,
  IDLE_TIMER_SUMMARY,
  messageRecorded,
  stateQuery,
  submitMessage,
} from '../contracts/conversation';
import { jobTurnEnded } from '../contracts/job-run';
import { decideToolCall } from '../contracts/tool-calls';
import { CONVERSATION, type ConversationInput, type QueuedMessage, type SubmitResult } from '../domain/conversation';
import { DELEGATION } from '../domain/delegate-lifecycle';
import { conversationWorkflowId } from '../domain/ids';
import type { InboundMessage } from '../domain/messages';
import { SA } from '../domain/search-attributes';
import type { ToolCallDecision } from '../domain/tool-calls';
import { localSteps, steps, store } from './activities';
import { ConversationQueue } from './conversation-queue';
import { IdleTimer } from './idle-timer';
import { DelegateRelay } from './relay';
import { ToolApprovals } from './server-tools';
import { runTurn, type RunningTurn, type TurnHost } from './turn';

// The turn's patches live with the turn; tests and scripts find them here too.
export { EFFECTS_IN_MODEL_STEP_PATCH, REPLY_FINISHES_TURN_PATCH, TURN_IN_ONE_TASK_PATCH } from './turn';

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
 * The patch from which a run takes up the turns PostgreSQL has open in their order of acceptance. Before it, a turn
 * whose message was recorded after others but not yet handed over went ahead of them (a burst of messages behind a
 * run's start answered its last message first).
 */
export const OPEN_TURNS_IN_ORDER_PATCH = 'conversation-open-turns-in-order';

/**
 * The patch from which a fresh run's start-up is one local step in its first workflow task (resumeConversation: the
 * open turns, and whether any delegate needs admitting), not two ordinary activities: the first turn of an idle
 * conversation runs in the task that started its run. Runs begun before read the open turns, then admit, as
 * activities.
 */
export const RESUME_IN_ONE_STEP_PATCH = 'conversation-resume-in-one-step';

/**
 * The patch from which the idle timer spans turns (idle-timer.ts): started by a wait when none runs, never cancelled
 * by the work that comes. Runs begun before start a timer with each wait and cancel it when work comes.
 */
export const IDLE_TIMER_SPANS_TURNS_PATCH = 'conversation-idle-timer-spans-turns';

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
  const idleTimer = new IdleTimer(idleMs, IDLE_TIMER_SUMMARY);

  const host: TurnHost = {
    conversationKey,
    agentId,
    conversationId,
    workflowId: conversationKey,
    patched,
    liveDelegates: relay.live,
    approvals,
    steering: turns,
    olderStore: db,
    began(turn, userTurn) {
      current = turn;
      if (userTurn) relay.userTurnStarted();
    },
    async finished(first, end) {
      // A job's run waits for this turn: told once the end is committed (it reads the end from PostgreSQL).
      if (first.notify) await tellTurnEnded(first.notify, first.messageId);
      if (lastOutcome !== end.status) {
        lastOutcome = end.status;
        upsertSearchAttributes([{ key: SA.outcome, value: end.status }]);
      }
    },
    ended() {
      current = undefined;
      turns.endTurn();
    },
  };

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

  if (input.carried) {
    // After continue-as-new the outcomes committed meanwhile are reconciled from PostgreSQL.
    await admitOutcomes(true);
  } else if (patched(RESUME_IN_ONE_STEP_PATCH)) {
    // A run that did not inherit a queue (the first, or one started after a run was terminated) takes up the turns
    // PostgreSQL still has open, oldest first, so that no accepted message is left unanswered; delegates' outcomes
    // committed meanwhile are reconciled too, when the conversation has any.
    const resumed = await localSteps.store.resumeConversation({ conversationKey });
    turns.takeUp(resumed.turns, () => true);
    if (resumed.delegateWork) await admitOutcomes(true, true);
  } else {
    turns.takeUp(await db().openTurns({ conversationKey }), () => patched(OPEN_TURNS_IN_ORDER_PATCH));
    await admitOutcomes(true, true);
  }

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
    await runTurn(next, host);
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
    if (patched(IDLE_TIMER_SPANS_TURNS_PATCH)) return (await idleTimer.wait(wake)) ? 'work' : 'idle';
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
}

/** The run may be gone (cancelled, or timed out): it reads the committed turn on its own timer then. */
async function tellTurnEnded(workflowId: string, messageId: string): Promise<void> {
  try {
    await getExternalWorkflowHandle(workflowId).signal(jobTurnEnded, { messageId });
  } catch {
    // Nothing to tell: a closed run no longer waits.
  }
}
