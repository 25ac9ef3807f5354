import {
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  patched,
  setHandler,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { ToolResults, TurnNote } from '../domain/conversation';
import { delegateFinished } from '../contracts/conversation';
import { budgetsChanged } from '../contracts/budgets';
import { cancelDelegate, delegateStateQuery, type DelegateInput } from '../contracts/delegate';
import {
  CONTINUE_TEXT,
  DELEGATION,
  NUDGE_TEXT,
  settleOutcome,
  type EndEvent,
  type LiveLifecycle,
  type OutcomeKind,
  type TerminalOwner,
} from '../domain/delegate-lifecycle';
import type { CommittedOutcome } from '../domain/delegation';
import { delegateWorkflowId } from '../domain/ids';
import type { ToolInputErrors, ToolResultBlock, ToolUseBlock } from '../domain/model';
import { DELEGATE_TOOL_NAMES, unknownTool } from '../domain/tool-names';
import { checkedInput } from './older-checks';
import { toolResult, toolUses } from '../domain/transcript';
import { SA } from '../domain/search-attributes';
import { activitySteps, model, store } from './activities';
import { budgetStopOf } from './budget-stop';
import { SERVER_TOOLS_PATCH } from './channel-tools';
import { runServerTool, ToolApprovals } from './server-tools';
import { decideToolCall } from '../contracts/tool-calls';
import type { ToolCallDecision } from '../domain/tool-calls';
import { isServerToolName } from '../domain/tool-servers';

interface WorkEnd {
  event: EndEvent;
  outcomeText?: string;
  reason?: string;
}

/**
 * A delegate works on one task in segments of model calls, under a wall clock. However it ends (outcome, segments
 * used up, nudges used up, failure, cancel, timeout), its outcome is committed to PostgreSQL first, and only then is
 * the conversation signalled.
 */
export async function delegateWorkflow(input: DelegateInput): Promise<CommittedOutcome> {
  const { agentId, delegateId, conversationKey } = input;
  const transcriptKey = delegateWorkflowId(agentId, delegateId);
  // An object, not a variable: signal handlers and the clock change it while the work runs.
  const live: { lifecycle: LiveLifecycle } = { lifecycle: 'running' };
  let cancelReason: string | undefined;
  let modelCalls = 0;
  // A budget that stopped a model call (its words) and how often the agent's budgets changed since the start.
  const budgets: { blocked?: string; changes: number } = { changes: 0 };
  const work = new CancellationScope();

  setHandler(delegateStateQuery, () => ({ lifecycle: live.lifecycle, modelCalls }));
  setHandler(budgetsChanged, () => void budgets.changes++);
  const approvals = new ToolApprovals();
  setHandler(decideToolCall, (d) => approvals.decide(d), {
    validator: (d: ToolCallDecision) => approvals.validate(d),
    description: "A person's decision on a tool call that waits for approval.",
  });
  setHandler(cancelDelegate, ({ reason }) => {
    cancelReason ??= reason;
    if (live.lifecycle === 'running') live.lifecycle = 'cancelling';
    work.cancel();
  });

  // The wall clock: when it runs out, the work stops and whatever the transcript holds is the result.
  const clock = new CancellationScope();
  void clock
    .run(() => sleep(input.wallClockSeconds * 1000, { summary: `wall clock of ${input.wallClockSeconds} s` }))
    .then(
      () => {
        if (live.lifecycle === 'running') live.lifecycle = 'timing_out';
        work.cancel();
      },
      () => undefined,
    );

  let end: WorkEnd;
  try {
    end = await work.run(() => doWork());
  } catch (err) {
    // Its wall clock ran out while a budget held it: blocked, by that budget.
    const byBudget = live.lifecycle === 'timing_out' ? budgets.blocked : undefined;
    end = byBudget ? { event: 'blocked', reason: byBudget } : stopped(err, live.lifecycle, cancelReason);
  } finally {
    clock.cancel();
  }

  const kind =
    end.event === 'blocked' && budgets.blocked ? 'blocked' : settleOutcome(live.lifecycle, end.event, modelCalls > 0);
  const owner = terminalOwner(live.lifecycle, end.event);
  // The commit and the signal run even if this workflow is being cancelled: an outcome is never left unwritten.
  return CancellationScope.nonCancellable(() => commitAndTell(kind, owner, end));

  /** Segments of model calls, each tool call answered, until the delegate sets its outcome or runs out of calls. */
  async function doWork(): Promise<WorkEnd> {
    let throughSeq = await store.prepareDelegate({ delegateId });
    let pending: { toolResults?: ToolResults; note?: TurnNote } = {};
    let nudges = 0;
    for (let segment = 1; segment <= DELEGATION.maxSegments; segment++) {
      if (segment > 1) pending.note = { callIndex: modelCalls, text: withContinue(pending.note) };
      for (let call = 1; call <= DELEGATION.modelCallsPerSegment; call++) {
        if (pending.toolResults || pending.note) {
          throughSeq = await appendToTranscript(pending.toolResults, pending.note);
          pending = {};
        }
        modelCalls++;
        const step = await callModel(modelCalls, throughSeq);
        throughSeq = step.seq;
        const calls = toolUses(step.content);
        if (calls.length === 0) {
          // Finished talking without an outcome: nudged twice, then failed (not cancelled, as Spacebot records it).
          if (++nudges > DELEGATION.outcomeNudges) {
            return {
              event: 'failure',
              reason: `finished without setting an outcome after ${DELEGATION.outcomeNudges} nudges`,
            };
          }
          pending = { note: { callIndex: modelCalls, text: NUDGE_TEXT } };
          continue;
        }
        nudges = 0;
        const { results, ended } = await runTools(calls, step.inputErrors);
        if (ended) {
          // The outcome is decided: a cancel or the clock arriving now must not undo it (a success wins).
          await CancellationScope.nonCancellable(() => appendToTranscript({ callIndex: modelCalls, results }));
          return ended;
        }
        pending = { toolResults: { callIndex: modelCalls, results } };
      }
    }
    if (pending.toolResults || pending.note) await appendToTranscript(pending.toolResults, pending.note);
    return { event: 'partial' };
  }

  /**
   * One model call. When a budget stops it, the delegate waits, durably, for the agent's budgets to change, then calls
   * again under the same key: it goes on from where it stopped. Its wall clock or a cancel ends the wait.
   */
  async function callModel(callIndex: number, throughSeq: number) {
    for (;;) {
      const seen = budgets.changes;
      try {
        return await model.callModel.executeWithOptions({ summary: `delegate model call ${callIndex}` }, [
          {
            conversationKey: transcriptKey,
            agentId,
            turnId: delegateId,
            callIndex,
            throughSeq,
            toolNames: DELEGATE_TOOL_NAMES,
            delegateId,
          },
        ]);
      } catch (err) {
        const stop = budgetStopOf(err);
        if (stop === undefined) throw err;
        budgets.blocked = stop;
        await store.markBudgetBlocked({ delegateId, reason: stop });
        await condition(() => budgets.changes > seen);
        budgets.blocked = undefined;
        await store.markBudgetBlocked({ delegateId, reason: null });
      }
    }
  }

  /** Writes what the next model call reads (tool results, a note) to the delegate's own transcript. */
  function appendToTranscript(toolResults: ToolResults | undefined, note?: TurnNote): Promise<number> {
    return store.appendToTranscript({ conversationKey: transcriptKey, turnId: delegateId, toolResults, note });
  }

  /** The tools one model call asked for, in order; once one has set the outcome, the rest are not run. */
  async function runTools(
    calls: ToolUseBlock[],
    inputErrors: ToolInputErrors | undefined,
  ): Promise<{ results: ToolResultBlock[]; ended: WorkEnd | undefined }> {
    const results: ToolResultBlock[] = [];
    let ended: WorkEnd | undefined;
    for (const c of calls) {
      if (ended) {
        results.push(toolResult(c.id, 'not run: the outcome was already set', true));
        continue;
      }
      const r = await runTool(c, inputErrors);
      results.push(r.result);
      ended = r.end;
    }
    return { results, ended };
  }

  async function runTool(
    c: ToolUseBlock,
    inputErrors: ToolInputErrors | undefined,
  ): Promise<{ result: ToolResultBlock; end?: WorkEnd }> {
    if (isServerToolName(c.name) && patched(SERVER_TOOLS_PATCH)) {
      const source = {
        agentId,
        origin: 'delegate' as const,
        transcriptKey,
        conversationKey,
        turnId: delegateId,
        callIndex: modelCalls,
        delegateId,
      };
      // A cancel or the wall clock ends a wait for a person through the work's cancellation scope.
      const result = await runServerTool(c, {
        source,
        workflowId: transcriptKey,
        approvals,
        cancelled: () => undefined,
        steps: activitySteps,
      });
      return { result };
    }
    const parsed = checkedInput(c, inputErrors, DELEGATE_TOOL_NAMES);
    if (!parsed.ok) return { result: toolResult(c.id, parsed.error, true) };
    const args = parsed.input as Record<string, unknown>;
    switch (c.name) {
      case 'set_status': {
        const { kind, text, blocked } = args as { kind: 'progress' | 'outcome'; text: string; blocked?: string };
        if (kind === 'progress') return { result: toolResult(c.id, 'progress noted; keep working') };
        live.lifecycle = 'completing';
        const end: WorkEnd = blocked ? { event: 'blocked', reason: blocked } : { event: 'success', outcomeText: text };
        return { result: toolResult(c.id, 'outcome recorded'), end };
      }
      case 'read_skill': {
        const skill = await store.readSkill({ agentId, name: String(args.name) });
        return { result: toolResult(c.id, skill.text, !skill.ok) };
      }
      case 'task_update':
      case 'add_task_comment': {
        const { taskNumber } = input;
        if (taskNumber === null) {
          const message = 'this delegate works on an ad-hoc task: there is no task on the board to change';
          return { result: toolResult(c.id, message, true) };
        }
        if (c.name === 'task_update') {
          await store.updateTask({ agentId, taskNumber, description: String(args.description) });
        } else {
          await store.commentOnTask({ agentId, taskNumber, delegateId, body: String(args.body) });
        }
        return { result: toolResult(c.id, 'done') };
      }
      default:
        return { result: toolResult(c.id, unknownTool(c.name), true) };
    }
  }

  /** Commits the outcome, then tells the conversation; the conversation re-reads the committed row to admit it. */
  async function commitAndTell(kind: OutcomeKind, owner: TerminalOwner, end: WorkEnd): Promise<CommittedOutcome> {
    const cancelled = end.event === 'cancel' || live.lifecycle === 'cancelling';
    const committed = await store.commitDelegateOutcome({
      delegateId,
      kind,
      owner,
      outcomeText: end.outcomeText,
      reason: cancelled ? (cancelReason ?? end.reason) : end.reason,
      modelCalls,
    });
    upsertSearchAttributes([{ key: SA.outcome, value: committed.outcomeKind }]);
    // Only after the commit: the conversation hears of it, and re-reads the committed row before admitting it.
    try {
      await getExternalWorkflowHandle(conversationKey).signal(delegateFinished, {
        delegateId,
        outcomeVersion: committed.outcomeVersion,
        transcriptVersion: committed.transcriptVersion,
        outcomeKind: committed.outcomeKind,
        terminalOwner: committed.terminalOwner,
      });
    } catch (err) {
      // No running conversation to tell (it was terminated): its next run reconciles from PostgreSQL at start.
      const error = err instanceof Error ? err.message : String(err);
      log.warn('conversation not signalled; it will reconcile', { conversationKey, error });
    }
    return committed;
  }
}

/**
 * How the work ended when it did not return: cancelled (by the signal, by the clock, or, with no signal, by a
 * cancellation of this workflow through Temporal), or failed.
 */
function stopped(err: unknown, lifecycle: LiveLifecycle, cancelReason: string | undefined): WorkEnd {
  if (isCancellation(err)) {
    const event = lifecycle === 'timing_out' ? 'timeout' : 'cancel';
    return { event, reason: cancelReason ?? 'the delegate workflow was cancelled' };
  }
  const reason = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
  return { event: 'failure', reason };
}

/** Who ended the delegate: a cancel (asked for, or through Temporal while it ran), its wall clock, or itself. */
function terminalOwner(lifecycle: LiveLifecycle, event: EndEvent): TerminalOwner {
  if (lifecycle === 'cancelling' || (event === 'cancel' && lifecycle === 'running')) return 'cancel';
  return lifecycle === 'timing_out' ? 'timeout' : 'delegate';
}

/** The note that opens a new segment: the pending note, if any, then the request to continue. */
function withContinue(note: TurnNote | undefined): string {
  return note ? `${note.text}\n\n${CONTINUE_TEXT}` : CONTINUE_TEXT;
}
