import { appendTranscript, appendTranscriptTx, loadTranscript, transcriptAfterOrigin, type NewTranscriptEntry } from '../db/conversations';
import {
  addTaskComment,
  admitOutcome,
  admittedResults,
  claimDelegate,
  commitOutcome,
  delegateBrief,
  findSkill,
  liveDelegateIds,
  markRelay,
  unadmittedOutcomes,
  updateTaskDescription,
  type AdmissionDecision,
  type CommittedOutcome,
  type SpawnDecision,
  type SpawnRequest,
} from '../db/delegation';
import { inTransaction, type Pool } from '../db/pool';
import {
  DELEGATION,
  backgroundNote,
  forkHistory,
  forkNote,
  outcomeResult,
  recoverProgress,
  taskMessage,
  type AdmittedResult,
  type DelegateFinished,
  type OutcomeKind,
  type TerminalOwner,
} from '../domain/delegation';
import { delegateWorkflowId } from '../domain/ids';
import { TRANSCRIPT_WINDOW } from '../domain/transcript';

/** The origin of a delegate's task message: what comes after it is the delegate's own work. */
const TASK_ORIGIN = 'task';

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

export function delegationActivities({ pool }: { pool: Pool }) {
  return {
    /** Every admission rule and the claim (delegate row, task attempt, ready → in_progress), before the child starts. */
    claimDelegate: async (request: SpawnRequest): Promise<SpawnDecision> => claimDelegate(pool, request),

    /**
     * The delegate's own transcript: a forked copy of the conversation (trimmed to the budget, with a note of what
     * was removed) or nothing, then the task. Returns the transcript's last seq.
     */
    prepareDelegate: async (input: { delegateId: string }): Promise<number> => {
      return inTransaction(pool, async (db) => {
        const brief = await delegateBrief(db, input.delegateId);
        const key = delegateWorkflowId(brief.agentId, brief.delegateId);
        await db.query('INSERT INTO conversations (key, agent_id, conversation_id) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING', [
          key,
          brief.agentId,
          `delegate:${brief.delegateId}`,
        ]);
        const entries: NewTranscriptEntry[] = [];
        if (brief.historyMode === 'fork') {
          const parent = await loadTranscript(db, brief.conversationKey, ALL_SEQ, TRANSCRIPT_WINDOW);
          const budget = Math.floor(DELEGATION.contextWindowTokens * (1 - DELEGATION.forkReserve)) - Math.ceil((brief.title.length + brief.description.length) / 4);
          const { kept, removed } = forkHistory(parent, budget);
          if (removed > 0) entries.push({ role: 'system', content: [{ type: 'text', text: forkNote(removed) }], text: forkNote(removed), origin: 'fork:note' });
          for (const m of kept) entries.push({ role: m.role, content: m.content, text: '', origin: `fork:${m.seq}` });
        }
        const task = taskMessage(brief.title, brief.description);
        entries.push({ role: 'user', content: [{ type: 'text', text: task }], text: task, origin: TASK_ORIGIN });
        return appendTranscript(db, key, brief.delegateId, entries);
      });
    },

    readSkill: async (input: { agentId: string; name: string }): Promise<{ ok: boolean; text: string }> => {
      const skill = await findSkill(pool, input.agentId, input.name);
      return skill ? { ok: true, text: skill.body } : { ok: false, text: `no skill named "${input.name}"` };
    },

    updateTask: async (input: { agentId: string; taskNumber: number; description: string }): Promise<void> =>
      updateTaskDescription(pool, input.agentId, input.taskNumber, input.description),

    commentOnTask: async (input: { agentId: string; taskNumber: number; delegateId: string; body: string }): Promise<void> =>
      addTaskComment(pool, input.agentId, input.taskNumber, input.delegateId, input.body),

    /**
     * The terminal commit, retried by Temporal until it lands. What a timeout or a partial run had done is recovered
     * from the transcript, which holds every model call.
     */
    commitDelegateOutcome: async (end: DelegateEnd): Promise<CommittedOutcome> => {
      const brief = await delegateBrief(pool, end.delegateId);
      // Only the delegate's own work counts, not the conversation history a fork copied in before its task.
      const transcript = await transcriptAfterOrigin(pool, delegateWorkflowId(brief.agentId, end.delegateId), TASK_ORIGIN, TRANSCRIPT_WINDOW);
      const hasTranscript = transcript.some((m) => m.role === 'assistant');
      const result = outcomeResult(end.kind, {
        outcomeText: end.outcomeText,
        recovered: recoverProgress(transcript),
        reason: end.reason,
        modelCalls: end.modelCalls,
        wallClockSeconds: brief.wallClockSeconds,
      });
      return commitOutcome(pool, { delegateId: end.delegateId, kind: end.kind, result, owner: end.owner, hasTranscript });
    },

    /**
     * Admission in the conversation: each signalled outcome is checked against its durable row; with `reconcile`,
     * every committed outcome of the conversation not yet admitted is too (a lost signal loses nothing). Returns the
     * admitted results and the delegates still live according to PostgreSQL.
     */
    admitDelegateOutcomes: async (input: {
      conversationKey: string;
      signals: DelegateFinished[];
      reconcile: boolean;
    }): Promise<{ admitted: AdmittedResult[]; decisions: { delegateId: string; decision: AdmissionDecision }[]; live: string[] }> => {
      const admitted: AdmittedResult[] = [];
      const decisions: { delegateId: string; decision: AdmissionDecision }[] = [];
      const consider = async (claim: DelegateFinished, via: 'signal' | 'reconcile') => {
        const { decision, result } = await admitOutcome(pool, input.conversationKey, claim, via);
        decisions.push({ delegateId: claim.delegateId, decision });
        if (!result) return;
        admitted.push(result);
        // The transcript records the event (admission runs between turns, never inside one).
        const note = `delegate.finished ${result.delegateId} (${result.kind})`;
        await appendTranscriptTx(pool, input.conversationKey, 'delegation', [
          { role: 'system', content: [{ type: 'text', text: note }], text: note, origin: `delegate-finished:${result.delegateId}:${claim.outcomeVersion}` },
        ]);
      };
      for (const s of input.signals) await consider(s, 'signal');
      if (input.reconcile) for (const s of await unadmittedOutcomes(pool, input.conversationKey)) await consider(s, 'reconcile');
      return { admitted, decisions, live: await liveDelegateIds(pool, input.conversationKey) };
    },

    /** Results past the retrigger cap go into the transcript as notes instead of being relayed. */
    noteBackgroundResults: async (input: { conversationKey: string; delegateIds: string[] }): Promise<void> => {
      await inTransaction(pool, async (db) => {
        const results = await admittedResults(db, input.delegateIds);
        await appendTranscript(
          db,
          input.conversationKey,
          'background',
          results.map((r) => ({ role: 'system', content: [{ type: 'text', text: backgroundNote(r) }], text: backgroundNote(r), origin: `background:${r.delegateId}` })),
        );
        await markRelay(db, input.delegateIds, 'noted');
      });
    },
  };
}
