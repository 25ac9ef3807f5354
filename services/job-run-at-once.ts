import { conversationWorkflowId, jobConversationId } from '../domain/ids';
import { afterDelivery, runBooking } from '../domain/job-runs';
import type { SecretRules } from '../domain/secret-scan';
import { CHANNEL_TOOL_NAMES } from '../domain/tool-names';
import type { DeliveryReport } from '../domain/delivery';
import type { TurnResult } from '../contracts/job-run';
import type { JobRow } from '../db/jobs';
import {
  beginJobRunTurn,
  bookJobRun,
  deliverJobResult,
  deliverJobTurn,
  type BegunRun,
  type JobRunDeps,
} from './job-run';
import { currentStep } from './step';
import { callTurnModelAndEffects, endingReply, type TurnModelStep, type TurnModelStepDeps } from './turn-model-step';

export interface JobRunAtOnceDeps {
  job: JobRunDeps;
  turn: TurnModelStepDeps;
}

export interface JobRunAtOnceInput {
  runId: string;
  jobId: string;
  firedAt: string;
  /** The message id of the run's first turn. */
  messageId: string;
  /** The reply guard's rules and the turn's model calls, as the workflow's own turn would take them. */
  rules: SecretRules;
  maxCalls: number;
}

/**
 * What the step leaves to the workflow: nothing (`booked`: delivered and booked), a skipped fire, or a begun run with
 * its turn's first model step (`step`), its turn ended (`ended`: the result is still to deliver and book), or neither
 * (the model call failed: the workflow makes it, with its own retries).
 */
export type JobRunAtOnce =
  | { kind: 'booked'; delivery: DeliveryReport }
  | Extract<BegunRun, { kind: 'skipped' }>
  | (Extract<BegunRun, { kind: 'run' }> & { turnId: string; step?: TurnModelStep; ended?: true });

/**
 * The run's turn, ended, and its result delivered. A reply this step sent is the turn's end: its text, and the job as
 * the run's beginning read it, serve the delivery. A turn a step taken before had ended is read back.
 */
async function deliverEndedTurn(
  deps: JobRunDeps,
  input: { runId: string; jobId: string; messageId: string; job: JobRow },
  step: TurnModelStep,
): Promise<TurnResult & { sent?: DeliveryReport }> {
  const { runId, jobId, job } = input;
  const text = 'replied' in step && step.replied ? endingReply(step.content).text : undefined;
  if (text === undefined) {
    const ask = { agentId: job.agentId, jobId, task: job.task, messageId: input.messageId };
    return deliverJobTurn(deps, { ...ask, runId, target: job.delivery });
  }
  const result = { runId, agentId: job.agentId, jobId, target: job.delivery, text };
  return { status: 'ok', text, sent: await deliverJobResult(deps, result, job) };
}

/**
 * A job's run in one step when its turn needs nothing of the workflow: the run begun and its task recorded, the turn's
 * first model step taken as the workflow's turn takes it (workflows/turn.ts), and when its answer is a reply that
 * ends the turn, the result delivered and the run booked. One local step a run where there were four, and one
 * activation of the workflow. Each part keeps its own ledger (the run's row, the turn's message and end, the model
 * call, the delivery), so a retried step does nothing twice. Whatever is not plain (a tool that waits for a person, a
 * channel tool, a failed call or send, a self-deleting job whose result was not delivered) the workflow takes up in
 * order, as steps of its own.
 */
export async function runJobAtOnce(deps: JobRunAtOnceDeps, input: JobRunAtOnceInput): Promise<JobRunAtOnce> {
  const { runId, jobId, messageId } = input;
  const begun = await beginJobRunTurn(deps.job, { runId, jobId, firedAt: input.firedAt, task: { messageId } });
  if (begun.kind !== 'run') return begun;
  const began = Date.now();
  const { job, turnId } = begun;
  const conversationId = jobConversationId(jobId);
  const call = {
    conversationKey: conversationWorkflowId(job.agentId, conversationId),
    agentId: job.agentId,
    turnId,
    callIndex: 1,
    throughSeq: 0,
    toolNames: CHANNEL_TOOL_NAMES,
    workflowId: runId,
    before: { begin: { messageIds: [messageId] } },
    runTools: true,
    replyAtOnce: { modelCalls: 1, conversationId, rules: input.rules },
    upToCall: input.maxCalls,
  };
  const step = await callTurnModelAndEffects(deps.turn, call, currentStep()).catch(() => undefined);
  if (!step) return begun;
  if (!('ended' in step) && !step.replied) return { ...begun, step };
  const ended = { ...begun, ended: true as const };
  try {
    const turn = await deliverEndedTurn(deps.job, { runId, jobId, messageId, job }, step);
    if (turn.status !== 'ok' || !turn.sent || afterDelivery(job.deleteAfterRun, turn.sent.outcome) === 'failed') {
      return ended;
    }
    const run = { runId, jobId, kind: job.schedule.kind, deleteAfterRun: job.deleteAfterRun };
    const end = { status: 'ok' as const, reply: turn.text, delivery: turn.sent };
    await bookJobRun(deps.job, runBooking(run, end, Date.now() - began));
    return { kind: 'booked', delivery: turn.sent };
  } catch {
    // A send that failed for now, or a booking PostgreSQL refused: the workflow's own steps retry them.
    return ended;
  }
}
