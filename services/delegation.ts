import {
  admitOutcome,
  admittedInBatch,
  admittedResults,
  markRelay,
  unadmittedOutcomes,
  unrelayedResults,
} from '../db/admissions';
import {
  appendTranscript,
  ensureConversation,
  loadTranscript,
  transcriptAfterOrigin,
  type NewTranscriptEntry,
} from '../db/conversations';
import {
  claimDelegate as claimDelegateRow,
  commitOutcome,
  delegateBrief,
  liveDelegateIds,
  liveDelegates,
  setBudgetBlocked,
  type SpawnDecision,
  type SpawnRequest,
} from '../db/delegates';
import { isDataError } from '../db/errors';
import { forkOf } from '../db/forks';
import { forkDryRun } from '../domain/evals';
import { TOOL } from '../domain/tool-names';
import { addTaskComment, findSkill, updateTaskDescription } from '../db/tasks';
import { publishEvent } from '../db/events';
import { inTransaction, type Pool } from '../db/pool';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import {
  DELEGATION,
  backgroundNote,
  delegateSystemPrompt,
  forkHistory,
  forkNote,
  outcomeResult,
  recoverProgress,
  taskMessage,
  type CommittedOutcome,
  type DelegateFinished,
  type OutcomeKind,
  type TerminalOwner,
} from '../domain/delegation';
import { delegateConversationId, delegateWorkflowId, transcriptOrigin } from '../domain/ids';
import type { AdmissionDecision } from '../domain/outcome-admission';
import { TRANSCRIPT_WINDOW, withoutUnansweredToolCalls } from '../domain/transcript';
import { workflowState } from './workflow-state';

/** A delegate whose claim never got a workflow within this long is taken to have none. */
const NEVER_STARTED_MS = 5 * 60_000;

/**
 * A delegate whose workflow ended without committing an outcome (terminated outside Keel), or never started, would
 * hold its task attempt and a slot forever: reconciliation commits `failed` for it, with owner `reconcile`.
 */
async function sweepVanishedDelegates(pool: Pool, client: Client, conversationKey: string): Promise<void> {
  for (const d of await liveDelegates(pool, conversationKey)) {
    const state = await workflowState(client, delegateWorkflowId(d.agentId, d.delegateId));
    if (state.open || (state.status === 'NOT_FOUND' && d.ageMs < NEVER_STARTED_MS)) continue;
    const how = state.status === 'NOT_FOUND' ? 'never started' : `ended (${state.status.toLowerCase()})`;
    await commitOutcome(pool, {
      delegateId: d.delegateId,
      kind: 'failed',
      owner: 'reconcile',
      result: outcomeResult('failed', { reason: `its workflow ${how} without committing an outcome` }),
      hasTranscript: false,
    });
  }
}

/** The origin of a delegate's task message: what comes after it is the delegate's own work. */

/** Every seq of a transcript. */
const ALL_SEQ = 2_147_483_647;

export interface DelegateEnd {
  delegateId: string;
  kind: OutcomeKind;
  owner: TerminalOwner;
  outcomeText?: string;
  reason?: string;
  modelCalls: number;
}

export type DelegationDeps = { pool: Pool };

/**
 * Every admission rule and the claim (delegate row, task attempt, ready → in_progress) before the child
 * starts.
 */
export async function claimDelegate(deps: DelegationDeps, request: SpawnRequest): Promise<SpawnDecision> {
  const { pool } = deps;
  const fork = await forkOf(pool, request.conversationKey);
  const dryRun = fork && forkDryRun(fork, TOOL.spawnDelegate);
  if (dryRun) return { kind: 'refused', reason: dryRun };
  try {
    return await claimDelegateRow(pool, request);
  } catch (err) {
    // The lookup failed on the data (SQLSTATE class 22): refuse, as Spacebot does, rather than retry forever.
    if (isDataError(err)) return { kind: 'refused', reason: `the task lookup failed: ${(err as Error).message}` };
    throw err;
  }
}

/**
 * The delegate's own transcript: a forked copy of the conversation (trimmed to the budget, with a note of what
 * was removed) or nothing, then the task. Returns the transcript's last seq.
 */
export async function prepareDelegate(deps: DelegationDeps, input: { delegateId: string }): Promise<number> {
  const { pool } = deps;
  return inTransaction(pool, async (db) => {
    const brief = await delegateBrief(db, input.delegateId);
    const key = delegateWorkflowId(brief.agentId, brief.delegateId);
    const conversationId = delegateConversationId(brief.delegateId);
    await ensureConversation(db, { key, agentId: brief.agentId, conversationId });
    const entries: NewTranscriptEntry[] = [];
    if (brief.historyMode === 'fork') {
      const parent = withoutUnansweredToolCalls(
        await loadTranscript(db, brief.conversationKey, ALL_SEQ, TRANSCRIPT_WINDOW),
      );
      // The budget: the context window less its reserve and less the system prompt (task, skills, index).
      const system = delegateSystemPrompt({
        task: taskMessage(brief.title, brief.description),
        requiredSkills: brief.requiredSkills,
        skillIndex: brief.skillIndex,
      });
      const budget =
        Math.floor(DELEGATION.contextWindowTokens * (1 - DELEGATION.forkReserve)) - Math.ceil(system.length / 4);
      const { kept, removed } = forkHistory(parent, budget);
      if (removed > 0)
        entries.push({
          role: 'system',
          content: [{ type: 'text', text: forkNote(removed) }],
          text: forkNote(removed),
          origin: transcriptOrigin.forkNote,
        });
      for (const m of kept)
        entries.push({ role: m.role, content: m.content, text: '', origin: transcriptOrigin.fork(m.seq) });
    }
    const task = taskMessage(brief.title, brief.description);
    entries.push({ role: 'user', content: [{ type: 'text', text: task }], text: task, origin: transcriptOrigin.task });
    return appendTranscript(db, key, brief.delegateId, entries);
  });
}

/** The delegate starts (a budget's words) or stops (null) waiting for a budget to be raised. */
export async function markBudgetBlocked(
  deps: DelegationDeps,
  input: { delegateId: string; reason: string | null },
): Promise<void> {
  const { pool } = deps;
  await setBudgetBlocked(pool, input.delegateId, input.reason);
}

export async function readSkill(
  deps: DelegationDeps,
  input: { agentId: string; name: string },
): Promise<{ ok: boolean; text: string }> {
  const { pool } = deps;
  const skill = await findSkill(pool, input.agentId, input.name);
  return skill ? { ok: true, text: skill.body } : { ok: false, text: `no skill named "${input.name}"` };
}

export async function updateTask(
  deps: DelegationDeps,
  input: { agentId: string; taskNumber: number; description: string },
): Promise<void> {
  const { pool } = deps;
  return updateTaskDescription(pool, input.agentId, input.taskNumber, input.description);
}

export async function commentOnTask(
  deps: DelegationDeps,
  input: {
    agentId: string;
    taskNumber: number;
    delegateId: string;
    body: string;
  },
): Promise<void> {
  const { pool } = deps;
  await addTaskComment(pool, input.agentId, input.taskNumber, input.delegateId, input.body);
}

/**
 * The terminal commit, retried by Temporal until it lands. What a timeout or a partial run had done is recovered
 * from the transcript, which holds every model call.
 */
export async function commitDelegateOutcome(deps: DelegationDeps, end: DelegateEnd): Promise<CommittedOutcome> {
  const { pool } = deps;
  const brief = await delegateBrief(pool, end.delegateId);
  // Only the delegate's own work counts, not the conversation history a fork copied in before its task.
  const transcript = await transcriptAfterOrigin(
    pool,
    delegateWorkflowId(brief.agentId, end.delegateId),
    transcriptOrigin.task,
    TRANSCRIPT_WINDOW,
  );
  const hasTranscript = transcript.some((m) => m.role === 'assistant');
  const result = outcomeResult(end.kind, {
    outcomeText: end.outcomeText,
    recovered: recoverProgress(transcript),
    reason: end.reason,
    modelCalls: end.modelCalls,
    wallClockSeconds: brief.wallClockSeconds,
  });
  return commitOutcome(pool, {
    delegateId: end.delegateId,
    kind: end.kind,
    result,
    owner: end.owner,
    hasTranscript,
  });
}

/**
 * Admission in the conversation: each signalled outcome is checked against its durable row; with `reconcile`,
 * every committed outcome of the conversation not yet admitted is too (a lost signal loses nothing). Returns the
 * admitted results and the delegates still live according to PostgreSQL.
 */
export async function admitDelegateOutcomes(
  deps: DelegationDeps,
  input: {
    conversationKey: string;
    /** The workflow's token for this call: a retry returns what an earlier attempt admitted. */
    batch: string;
    signals: DelegateFinished[];
    reconcile: boolean;
    /** A fresh run also takes up results admitted before but never relayed. */
    resume?: boolean;
  },
): Promise<{
  admitted: string[];
  decisions: { delegateId: string; decision: AdmissionDecision }[];
  live: string[];
}> {
  const { pool } = deps;
  const admitted = await admittedInBatch(pool, input.batch);
  const decisions: { delegateId: string; decision: AdmissionDecision }[] = [];
  // Live first: a delegate that commits while this runs is then found by the reconcile below, never missed by both.
  const live = await liveDelegateIds(pool, input.conversationKey);
  const consider = async (claim: DelegateFinished, via: 'signal' | 'reconcile') => {
    const { decision, result } = await admitOutcome(
      pool,
      input.conversationKey,
      claim,
      via,
      input.batch,
      async (db, r) => {
        // The transcript records the event (admission runs between turns, never inside one).
        const note = `delegate.finished ${r.delegateId} (${r.kind})`;
        await appendTranscript(db, input.conversationKey, 'delegation', [
          {
            role: 'system',
            content: [{ type: 'text', text: note }],
            text: note,
            origin: transcriptOrigin.delegateFinished(r.delegateId, claim.outcomeVersion),
          },
        ]);
        await publishEvent(db, input.conversationKey, 'delegate.finished', [r.delegateId, claim.outcomeVersion], {
          delegateId: r.delegateId,
          kind: r.kind,
        });
      },
    );
    decisions.push({ delegateId: claim.delegateId, decision });
    if (result && !admitted.includes(result.delegateId)) admitted.push(result.delegateId);
  };
  for (const s of input.signals) await consider(s, 'signal');
  if (input.reconcile) {
    await sweepVanishedDelegates(pool, Context.current().client, input.conversationKey);
    for (const s of await unadmittedOutcomes(pool, input.conversationKey)) await consider(s, 'reconcile');
  }
  if (input.resume)
    for (const id of await unrelayedResults(pool, input.conversationKey)) if (!admitted.includes(id)) admitted.push(id);
  return { admitted, decisions, live: live.filter((id) => !admitted.includes(id)) };
}

/** Results past the retrigger cap go into the transcript as notes instead of being relayed. */
export async function noteBackgroundResults(
  deps: DelegationDeps,
  input: { conversationKey: string; delegateIds: string[] },
): Promise<void> {
  const { pool } = deps;
  await inTransaction(pool, async (db) => {
    const results = await admittedResults(db, input.delegateIds);
    await appendTranscript(
      db,
      input.conversationKey,
      'background',
      results.map((r) => ({
        role: 'system',
        content: [{ type: 'text', text: backgroundNote(r) }],
        text: backgroundNote(r),
        origin: transcriptOrigin.backgroundResult(r.delegateId),
      })),
    );
    await markRelay(db, input.delegateIds, 'noted');
  });
}
