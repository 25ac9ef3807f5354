import {
  CancellationScope,
  condition,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import type { DeliveryReport } from '../domain/delivery';
import { budgetsChanged } from '../contracts/budgets';
import { jobTurnEnded, type JobRunInput, type TurnResult } from '../contracts/job-run';
import {
  afterDelivery,
  failsAfterErrors,
  JOBS,
  retryDelayMs,
  runBooking,
  TURN_END_MISSING,
  type RunEnd,
} from '../domain/job-runs';
import { LIMITS } from '../domain/limits';
import { SA } from '../domain/search-attributes';
import { decideToolCall } from '../contracts/tool-calls';
import type { ToolCallDecision } from '../domain/tool-calls';
import { conversationWorkflowId, jobConversationId, jobTurnMessageId } from '../domain/ids';
import { delivery, jobRunAtOnce, localSteps, steps, store } from './activities';
import { replyRules } from './channel-tools';
import { ToolApprovals } from './server-tools';
import { runTurn, type TurnModelStep } from './turn';

/** Runs begun before JOB_TURN_SIGNAL_PATCH: the turn in one activity that waits for it, heartbeating. */
const turns = proxyActivities<KeelActivities>({
  startToCloseTimeout: '4 hours',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** The patch that keeps a self-deleting job whose delivery failed for good (runs begun before it delete the job). */
export const KEEP_UNDELIVERED_PATCH = 'job-kept-when-undelivered';
/** The patch after which a run asks for its turn and waits for the conversation's signal, holding no activity. */
export const JOB_TURN_SIGNAL_PATCH = 'job-turn-by-signal';
/** The patch after which a run a budget stopped waits for the budgets to change (before it, it was booked at once). */
export const JOB_BUDGET_WAIT_PATCH = 'job-waits-for-budget';
/** The patch after which a run waits for its turn until a deadline, then books an error that says why. */
export const JOB_TURN_DEADLINE_PATCH = 'job-turn-deadline';

/**
 * The patch from which a run runs its task's turn itself, in its own workflow, and takes its steps as local ones: one
 * workflow and one workflow task per run where there were two workflows, two signals and a dozen steps. The turn is
 * still a turn of the job's conversation (its transcript, its memory of earlier runs). Runs begun before ask the
 * conversation's workflow for it.
 */
export const JOB_TURN_IN_RUN_PATCH = 'job-turn-in-run';

/**
 * The patch from which a run's beginning records its first task too (beginJobRunTurn), and the read of its turn's end
 * also delivers the result (deliverJobTurn): four local steps where there were six. Runs begun before take each as a
 * step of its own.
 */
export const JOB_RUN_FEWER_STEPS_PATCH = 'job-run-fewer-steps';

/**
 * The patch from which a run whose turn needs nothing of the workflow is one local step (runJobAtOnce): begun, its
 * task recorded, its turn's first model step taken and, when that answers with a reply that ends the turn, its result
 * delivered and the run booked. What the step leaves, the workflow takes up as before. Runs begun before take four.
 */
export const JOB_RUN_AT_ONCE_PATCH = 'job-run-at-once';

/** What a run asks of its turn: the job's task, under a message id of its own per attempt. */
type JobTurnAsk = { agentId: string; jobId: string; task: string; messageId: string };

/** The run's first turn as its beginning left it: recorded, and with its first model step or its end (at once). */
type RecordedTurn = { turnId?: string; step?: TurnModelStep; ended?: true };

/**
 * A turn that did not end within the run's deadline: its conversation cannot finish it (stuck, failing, gone). An
 * answer the turn's own step delivered comes with its report (`sent`).
 */
type TurnOutcome = (TurnResult & { sent?: DeliveryReport }) | { status: 'stuck'; error: string };

/**
 * One fire of a scheduled job (started by its Temporal Schedule): the task runs, in this workflow, as a turn of the
 * job's own conversation, its result is delivered with the delivery's own retries, and the run is booked in one
 * write. A failed turn is retried here with the job backoff, until the next fire is sooner or the job has failed too
 * often.
 */
export async function jobRunWorkflow(input: JobRunInput): Promise<void> {
  const runId = workflowInfo().workflowId;
  const firedAt = workflowInfo().startTime;
  const ended = new Set<string>();
  setHandler(jobTurnEnded, ({ messageId }) => void ended.add(messageId));
  let budgetChanges = 0;
  setHandler(budgetsChanged, () => void budgetChanges++);
  const inRun = patched(JOB_TURN_IN_RUN_PATCH);
  // Every earlier patch of a run is older than this shape: a run of it asks none (no marker, no search attribute).
  const since = (patchId: string) => inRun || patched(patchId);
  // The run's own PostgreSQL steps and deliveries: local from JOB_TURN_IN_RUN_PATCH, ordinary activities before it.
  const run = inRun ? localSteps : { store, delivery };
  const approvals = new ToolApprovals();
  if (inRun) {
    setHandler(decideToolCall, (d) => approvals.decide(d), {
      validator: (d: ToolCallDecision) => approvals.validate(d),
      description: "A person's decision on a tool call of the run's turn that waits for approval.",
    });
  }
  const fewer = inRun && patched(JOB_RUN_FEWER_STEPS_PATCH);
  const beginning = { runId, jobId: input.jobId, firedAt: firedAt.toISOString() };
  const firstMessageId = jobTurnMessageId(runId, 1);
  const begun =
    fewer && patched(JOB_RUN_AT_ONCE_PATCH)
      ? await jobRunAtOnce.runJobAtOnce({
          ...beginning,
          messageId: firstMessageId,
          rules: replyRules(since),
          maxCalls: LIMITS.modelCallsPerTurn,
        })
      : fewer
        ? await run.store.beginJobRunTurn({ ...beginning, task: { messageId: firstMessageId } })
        : await run.store.beginJobRun(beginning);
  if (begun.kind === 'skipped' || begun.kind === 'booked') {
    upsertSearchAttributes([{ key: SA.outcome, value: begun.kind === 'booked' ? 'ok' : 'skipped' }]);
    return;
  }
  const { job, backoffMs, turnDeadlineMs } = begun;
  const started = Date.now();
  const runOfJob = { runId, jobId: job.id, kind: job.schedule.kind, deleteAfterRun: job.deleteAfterRun };
  const book = (end: RunEnd) => run.store.bookJobRun(runBooking(runOfJob, end, Date.now() - started));

  for (let attempt = 1; ; attempt++) {
    const ask = { agentId: job.agentId, jobId: job.id, task: job.task, messageId: jobTurnMessageId(runId, attempt) };
    const turn: TurnOutcome = inRun
      ? await ownTurn(ask, attempt === 1 ? begun : undefined)
      : patched(JOB_TURN_SIGNAL_PATCH)
        ? await turnOf(ask)
        : await turns.runJobTurn(ask);
    if (turn.status === 'ok') {
      const sent =
        turn.sent ??
        (turn.text
          ? await run.delivery.deliverJobResult({
              runId,
              agentId: job.agentId,
              jobId: job.id,
              target: job.delivery,
              text: turn.text,
            })
          : ({ outcome: 'skipped:empty_reply', attempts: 0 } satisfies DeliveryReport));
      // The turn succeeded; a job that deletes itself still stays, failed, when its result was not delivered: its run
      // is the evidence, and the owner is told.
      if (afterDelivery(job.deleteAfterRun, sent.outcome) === 'failed' && since(KEEP_UNDELIVERED_PATCH)) {
        const error = `the result could not be delivered: ${sent.outcome}`;
        const { agentId, name } = job;
        await run.delivery.failJob({
          runId,
          jobId: job.id,
          agentId,
          name,
          error,
          errors: 0,
          undelivered: sent.outcome,
        });
        await book({ status: 'ok', reply: turn.text, delivery: sent, error, fails: true });
        upsertSearchAttributes([{ key: SA.outcome, value: 'failed' }]);
        return;
      }
      await book({ status: 'ok', reply: turn.text, delivery: sent });
      upsertSearchAttributes([{ key: SA.outcome, value: 'ok' }]);
      return;
    }
    if (turn.status === 'budget') {
      // The agent's money ran out, not the job's: never counted toward failing the job. The run waits, durably, for
      // the budgets to change and then asks again; its next fire takes over if it comes first.
      if (since(JOB_BUDGET_WAIT_PATCH) && (await budgetRaised(turn.error))) continue;
      await book({ status: 'error', error: turn.error });
      upsertSearchAttributes([{ key: SA.outcome, value: 'budget' }]);
      return;
    }
    const counted = await run.store.recordJobRunError({ runId, jobId: job.id, attempt, error: turn.error });
    if (failsAfterErrors(job.schedule.kind, counted.errors)) {
      const notice = await run.delivery.failJob({
        runId,
        jobId: job.id,
        agentId: job.agentId,
        name: job.name,
        error: turn.error,
        errors: counted.errors,
      });
      await book({ status: 'error', error: turn.error, fails: true, delivery: notice });
      upsertSearchAttributes([{ key: SA.outcome, value: 'failed' }]);
      return;
    }
    const delay = retryDelayMs(attempt, counted.untilNextFireMs ?? undefined, backoffMs);
    // No retry when the turn could not finish (a retry would wait on the same conversation), when the job was paused
    // or deleted meanwhile, or when its next fire comes first (it takes over).
    if (
      turn.status === 'stuck' ||
      counted.status !== 'active' ||
      (counted.untilNextFireMs !== null && delay >= counted.untilNextFireMs)
    ) {
      await book({ status: 'error', error: turn.error });
      upsertSearchAttributes([{ key: SA.outcome, value: 'error' }]);
      return;
    }
    await sleep(delay, { summary: `retry ${attempt + 1} after: ${turn.error.slice(0, 80)}` });
  }

  /** Waits, shown in GET …/runs, until the agent's budgets change (true) or the job's next fire is due (false). */
  async function budgetRaised(reason: string): Promise<boolean> {
    const seen = budgetChanges;
    const changed = () => budgetChanges > seen;
    const { untilNextFireMs } = await run.store.markJobRunBudgetBlocked({ runId, jobId: input.jobId, reason });
    const raised =
      untilNextFireMs === null
        ? await condition(changed).then(() => true)
        : await condition(changed, untilNextFireMs, { summary: `wait for a budget: ${reason.slice(0, 80)}` });
    await run.store.markJobRunBudgetBlocked({ runId, jobId: input.jobId, reason: null });
    return raised;
  }

  /**
   * The task as a turn of the job's own conversation, run here: its message recorded, then the same turn a
   * conversation's workflow runs, with its model calls, tools and guarded reply. Delegates it spawned report to the
   * conversation, whose workflow is started for them. The outcome is read as committed.
   */
  async function ownTurn(ask: JobTurnAsk, recorded: RecordedTurn | undefined): Promise<TurnOutcome> {
    const turnId = recorded?.turnId ?? (await run.store.recordJobTask(ask)).turnId;
    // The run's first step ended the turn already: its result is delivered (once, by the ledger) and booked here.
    if (recorded?.ended) return run.delivery.deliverJobTurn({ ...ask, runId, target: job.delivery });
    const conversationId = jobConversationId(ask.jobId);
    const liveDelegates = new Set<string>();
    await runTurn(
      { messageId: ask.messageId, turnId, mode: 'queue' },
      {
        conversationKey: conversationWorkflowId(ask.agentId, conversationId),
        agentId: ask.agentId,
        conversationId,
        workflowId: runId,
        // Every patch of a turn predates this shape too.
        patched: since,
        firstStep: recorded?.step,
        liveDelegates,
        approvals,
        // A job's conversation takes no messages of people: nothing steers into or interrupts its turn.
        steering: { hasSteered: false, takeSteered: () => [] },
        olderStore: () => run.store,
        began: () => undefined,
        finished: () => Promise.resolve(),
        ended: () => undefined,
      },
    );
    if (liveDelegates.size > 0) await run.store.handOverJobDelegates({ agentId: ask.agentId, jobId: ask.jobId });
    if (fewer) return run.delivery.deliverJobTurn({ ...ask, runId, target: job.delivery });
    return (await run.store.jobTurnResult(ask)) ?? { status: 'error', error: TURN_END_MISSING };
  }

  /**
   * The task as a turn of the job's own conversation: asked for (idempotent by messageId), then awaited without
   * holding an activity. The conversation signals when the turn's end is committed; the end is read from PostgreSQL.
   */
  async function turnOf(ask: JobTurnAsk): Promise<TurnOutcome> {
    // Runs begun before the deadline wait as they did: without one.
    const deadlineMs = patched(JOB_TURN_DEADLINE_PATCH) ? (turnDeadlineMs ?? JOBS.turnDeadlineMs) : undefined;
    const askedAt = Date.now();
    const stuck = async (): Promise<TurnOutcome> => ({
      status: 'stuck',
      error: (await store.reportStuckJobTurn({ ...ask, waitedMs: deadlineMs ?? 0 })).error,
    });
    // The signal is matched by the messageId the conversation took (recorded in history, so a replay matches it too).
    // A conversation whose every workflow task fails never takes it: the asking counts toward the deadline too.
    const taken =
      deadlineMs === undefined
        ? await store.askForJobTurn({ ...ask, notify: runId })
        : await CancellationScope.withTimeout(deadlineMs, () => store.askForJobTurn({ ...ask, notify: runId })).catch(
            (err: unknown) => {
              if (isCancellation(err)) return undefined;
              throw err;
            },
          );
    if (!taken) return stuck();
    const { messageId } = taken;
    for (;;) {
      const left = deadlineMs === undefined ? JOBS.turnRecheckMs : askedAt + deadlineMs - Date.now();
      const wait = Math.min(JOBS.turnRecheckMs, left);
      if (wait > 0) await condition(() => ended.has(messageId), wait, { summary: 'wait for the turn' });
      // Runs with a deadline read it as an ordinary activity: a local one resolves in another activation on replay
      // than live when it outlives a workflow task, and the turn's signal may arrive meanwhile (conversation.ts).
      const turn = await (deadlineMs === undefined ? steps : store).jobTurnResult(ask);
      if (turn) return turn;
      if (deadlineMs !== undefined && Date.now() - askedAt >= deadlineMs) return stuck();
    }
  }
}
