import type { CommittedOutcome, HistoryMode, OutcomeKind, TerminalOwner } from '../domain/delegation';
import { DELEGATION, taskRefusal, taskStatusAfter, terminalLifecycle } from '../domain/delegation';
import { exactInstant, type PageRequest } from './page';
import { inTransaction, type Pool, type Queryable } from './pool';
import { findSkill, getTask, lockTask, skillNames } from './tasks';

// ---- the claim ----------------------------------------------------------------------------------------------------

export interface SpawnRequest {
  agentId: string;
  conversationKey: string;
  /** Chosen by the workflow, so a retried claim finds its own row. */
  delegateId: string;
  task?: number;
  text?: string;
  historyMode?: HistoryMode;
}

export type SpawnDecision =
  | { kind: 'spawned'; delegateId: string; taskNumber: number | null; wallClockSeconds: number }
  | { kind: 'existing'; delegateId: string }
  | { kind: 'refused'; reason: string };

/**
 * Every admission rule, then the claim, in one transaction: the delegate row and the task attempt exist before the
 * delegate's workflow starts, and the unique partial index settles any race between two claims of one task.
 */
export async function claimDelegate(pool: Pool, r: SpawnRequest): Promise<SpawnDecision> {
  return inTransaction(pool, async (db) => {
    const mine = await db.query<{ task_number: number | null; wall_clock_seconds: number }>(
      'SELECT task_number, wall_clock_seconds FROM delegates WHERE delegate_id = $1',
      [r.delegateId],
    );
    if (mine.rows[0]) {
      const { task_number: taskNumber, wall_clock_seconds: wallClockSeconds } = mine.rows[0];
      return { kind: 'spawned', delegateId: r.delegateId, taskNumber, wallClockSeconds };
    }

    // One claim at a time per conversation: the live count below stays true until this transaction ends.
    await db.query('SELECT 1 FROM conversations WHERE key = $1 FOR UPDATE', [r.conversationKey]);
    let taskText: string;
    let historyMode: HistoryMode = r.historyMode ?? 'fork';
    let wallClockSeconds: number = DELEGATION.defaultWallClockSeconds;
    if (r.task !== undefined) {
      const task = await lockTask(db, r.agentId, r.task);
      if (!task) return { kind: 'refused', reason: `task #${r.task} not found` };
      const refusal = taskRefusal(task.number, task.status);
      if (refusal) return { kind: 'refused', reason: refusal };
      const open = await db.query<{ delegate_id: string }>(
        'SELECT delegate_id FROM task_attempts WHERE agent_id = $1 AND task_number = $2 AND ended_at IS NULL',
        [r.agentId, r.task],
      );
      if (open.rows[0]) {
        return {
          kind: 'refused',
          reason: `task #${r.task} already has an open attempt (delegate ${open.rows[0].delegate_id})`,
        };
      }
      const unknown: string[] = [];
      for (const name of task.required_skills) if (!(await findSkill(db, r.agentId, name))) unknown.push(name);
      if (unknown.length) {
        return { kind: 'refused', reason: `task #${r.task} requires unknown skill(s): ${unknown.join(', ')}` };
      }
      taskText = task.title;
      historyMode = r.historyMode ?? task.history_mode;
      wallClockSeconds = task.wall_clock_seconds;
    } else {
      taskText = r.text ?? '';
      // The same ad-hoc task already running: hand back that delegate rather than start a second one.
      const same = await db.query<{ delegate_id: string }>(
        `SELECT delegate_id FROM delegates
          WHERE conversation_key = $1 AND task_number IS NULL AND task_text = $2 AND completed_at IS NULL LIMIT 1`,
        [r.conversationKey, taskText],
      );
      if (same.rows[0]) return { kind: 'existing', delegateId: same.rows[0].delegate_id };
    }
    const live = await db.query<{ n: string }>(
      'SELECT count(*) AS n FROM delegates WHERE conversation_key = $1 AND completed_at IS NULL',
      [r.conversationKey],
    );
    if (Number(live.rows[0]!.n) >= DELEGATION.maxLiveDelegatesPerConversation) {
      return {
        kind: 'refused',
        reason:
          `at most ${DELEGATION.maxLiveDelegatesPerConversation} delegates may run at once in a conversation; ` +
          'wait for one to finish or cancel one',
      };
    }

    await db.query(
      `INSERT INTO delegates (delegate_id, agent_id, conversation_key, task_number, task_text, history_mode,
         wall_clock_seconds)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [r.delegateId, r.agentId, r.conversationKey, r.task ?? null, taskText, historyMode, wallClockSeconds],
    );
    if (r.task !== undefined) {
      await db.query(
        `INSERT INTO task_attempts (agent_id, task_number, attempt, delegate_id)
         VALUES ($1, $2, (SELECT COALESCE(max(attempt), 0) + 1 FROM task_attempts
                          WHERE agent_id = $1 AND task_number = $2), $3)`,
        [r.agentId, r.task, r.delegateId],
      );
      await db.query(
        `UPDATE tasks SET status = 'in_progress', updated_at = now()
          WHERE agent_id = $1 AND number = $2 AND status = 'ready'`,
        [r.agentId, r.task],
      );
    }
    return { kind: 'spawned', delegateId: r.delegateId, taskNumber: r.task ?? null, wallClockSeconds };
  });
}

// ---- the delegate's run -------------------------------------------------------------------------------------------

export interface DelegateBrief {
  delegateId: string;
  agentId: string;
  conversationKey: string;
  taskNumber: number | null;
  title: string;
  description: string;
  historyMode: HistoryMode;
  wallClockSeconds: number;
  requiredSkills: { name: string; body: string }[];
  skillIndex: string[];
  /** The tool servers the delegate may use; null: all of the agent's. */
  toolServers: string[] | null;
}

export async function delegateBrief(db: Queryable, delegateId: string): Promise<DelegateBrief> {
  const { rows } = await db.query<{
    agent_id: string;
    conversation_key: string;
    task_number: number | null;
    task_text: string;
    history_mode: HistoryMode;
    wall_clock_seconds: number;
  }>(
    `SELECT agent_id, conversation_key, task_number, task_text, history_mode, wall_clock_seconds
       FROM delegates WHERE delegate_id = $1`,
    [delegateId],
  );
  const d = rows[0];
  if (!d) throw new Error(`delegate ${delegateId} not found`);
  const task = d.task_number !== null ? await getTask(db, d.agent_id, d.task_number) : undefined;
  const required: { name: string; body: string }[] = [];
  for (const name of task?.requiredSkills ?? []) {
    const skill = await findSkill(db, d.agent_id, name);
    if (skill) required.push(skill);
  }
  return {
    delegateId,
    agentId: d.agent_id,
    conversationKey: d.conversation_key,
    taskNumber: d.task_number,
    title: task?.title ?? d.task_text.split('\n')[0] ?? '',
    description: task ? task.description : d.task_text.includes('\n') ? d.task_text : '',
    historyMode: d.history_mode,
    wallClockSeconds: d.wall_clock_seconds,
    requiredSkills: required,
    skillIndex: await skillNames(db, d.agent_id),
    toolServers: task?.toolServers ?? null,
  };
}

/**
 * The terminal commit: one conditional UPDATE, so exactly one writer wins; the loser reads the winner back. In the
 * same transaction the task attempt closes with the committed kind and the task moves to done or failed.
 */
export async function commitOutcome(
  pool: Pool,
  c: { delegateId: string; kind: OutcomeKind; result: string; owner: TerminalOwner; hasTranscript: boolean },
): Promise<CommittedOutcome> {
  return inTransaction(pool, async (db) => {
    const won = await db.query(
      `UPDATE delegates SET lifecycle = $2, outcome_kind = $3, result = $4, outcome_version = outcome_version + 1,
         transcript_version = transcript_version + $5, terminal_owner = $6, completed_at = now()
       WHERE delegate_id = $1 AND completed_at IS NULL AND outcome_version = 0`,
      [c.delegateId, terminalLifecycle(c.kind), c.kind, c.result, c.hasTranscript ? 1 : 0, c.owner],
    );
    const { rows } = await db.query<{
      agent_id: string;
      conversation_key: string;
      task_number: number | null;
      outcome_kind: OutcomeKind;
      result: string;
      outcome_version: number;
      transcript_version: number;
      terminal_owner: TerminalOwner;
    }>('SELECT * FROM delegates WHERE delegate_id = $1', [c.delegateId]);
    const d = rows[0]!;
    if (d.task_number !== null) {
      await db.query(
        `UPDATE task_attempts SET ended_at = now(), outcome = $3, summary = left($4, ${DELEGATION.attemptSummaryChars})
         WHERE agent_id = $1 AND task_number = $2 AND delegate_id = $5 AND ended_at IS NULL`,
        [d.agent_id, d.task_number, d.outcome_kind, d.result, c.delegateId],
      );
      await db.query(
        `UPDATE tasks SET status = $3, updated_at = now()
          WHERE agent_id = $1 AND number = $2 AND status = 'in_progress'`,
        [d.agent_id, d.task_number, taskStatusAfter(d.outcome_kind)],
      );
    }
    return {
      delegateId: c.delegateId,
      conversationKey: d.conversation_key,
      outcomeKind: d.outcome_kind,
      result: d.result,
      outcomeVersion: d.outcome_version,
      transcriptVersion: d.transcript_version,
      terminalOwner: d.terminal_owner,
      won: (won.rowCount ?? 0) > 0,
    };
  });
}

// ---- the conversation's delegates ---------------------------------------------------------------------------------

export async function liveDelegateIds(db: Queryable, conversationKey: string): Promise<string[]> {
  const { rows } = await db.query<{ delegate_id: string }>(
    'SELECT delegate_id FROM delegates WHERE conversation_key = $1 AND completed_at IS NULL ORDER BY created_at',
    [conversationKey],
  );
  return rows.map((r) => r.delegate_id);
}

/** Live delegates with what a sweep needs to find their workflows. */
export async function liveDelegates(
  db: Queryable,
  conversationKey: string,
): Promise<{ delegateId: string; agentId: string; ageMs: number }[]> {
  const { rows } = await db.query<{ delegate_id: string; agent_id: string; age_ms: string }>(
    `SELECT delegate_id, agent_id, (extract(epoch FROM now() - created_at) * 1000)::bigint AS age_ms
       FROM delegates WHERE conversation_key = $1 AND completed_at IS NULL`,
    [conversationKey],
  );
  return rows.map((r) => ({ delegateId: r.delegate_id, agentId: r.agent_id, ageMs: Number(r.age_ms) }));
}

export interface DelegateView {
  delegateId: string;
  conversationId: string;
  taskNumber?: number;
  lifecycle: string;
  outcome?: {
    kind: OutcomeKind;
    result: string;
    outcomeVersion: number;
    transcriptVersion: number;
    terminalOwner: TerminalOwner;
  };
  admittedAt?: string;
  relay?: string;
  /** Waiting for a budget to be raised: which budget and why (docs/spend.md). */
  budgetBlocked?: string;
  admissions: { outcomeVersion: number; decision: string; via: string; at: string }[];
}

/** A delegate starts or stops waiting for a budget to be raised (the budget's words, or null). */
export async function setBudgetBlocked(db: Queryable, delegateId: string, reason: string | null): Promise<void> {
  await db.query('UPDATE delegates SET budget_blocked = $2 WHERE delegate_id = $1', [delegateId, reason]);
}

/** The agent's delegates waiting for a budget to be raised. */
export async function budgetBlockedDelegates(db: Queryable, agentId: string): Promise<string[]> {
  const { rows } = await db.query<{ delegate_id: string }>(
    `SELECT delegate_id FROM delegates
      WHERE agent_id = $1 AND budget_blocked IS NOT NULL AND completed_at IS NULL`,
    [agentId],
  );
  return rows.map((r) => r.delegate_id);
}

interface DelegateDbRow {
  delegate_id: string;
  conversation_key: string;
  task_number: number | null;
  lifecycle: string;
  outcome_kind: OutcomeKind | null;
  result: string | null;
  outcome_version: number;
  transcript_version: number;
  terminal_owner: TerminalOwner | null;
  admitted_at: Date | null;
  relay: string | null;
  budget_blocked: string | null;
  conversation_id: string;
}

interface AdmissionDbRow {
  delegate_id: string;
  outcome_version: number;
  decision: string;
  via: string;
  at: Date;
}

/** The one view of a delegate, for its own GET and for the list alike. */
function delegateViewOf(d: DelegateDbRow, admissions: readonly AdmissionDbRow[]): DelegateView {
  const outcome = d.outcome_kind && {
    kind: d.outcome_kind,
    result: d.result ?? '',
    outcomeVersion: d.outcome_version,
    transcriptVersion: d.transcript_version,
    terminalOwner: d.terminal_owner!,
  };
  return {
    delegateId: d.delegate_id,
    conversationId: d.conversation_id,
    ...(d.task_number !== null ? { taskNumber: d.task_number } : {}),
    lifecycle: d.lifecycle,
    ...(outcome ? { outcome } : {}),
    ...(d.admitted_at ? { admittedAt: d.admitted_at.toISOString() } : {}),
    ...(d.relay ? { relay: d.relay } : {}),
    ...(d.budget_blocked && !d.outcome_kind ? { budgetBlocked: d.budget_blocked } : {}),
    admissions: admissions.map((a) => ({
      outcomeVersion: a.outcome_version,
      decision: a.decision,
      via: a.via,
      at: a.at.toISOString(),
    })),
  };
}

/** The admission decisions of these delegates, in the order they were made, by delegate. */
async function admissionsOf(db: Queryable, delegateIds: readonly string[]): Promise<Map<string, AdmissionDbRow[]>> {
  const { rows } = await db.query<AdmissionDbRow>(
    `SELECT delegate_id, outcome_version, decision, via, at FROM delegate_admissions
      WHERE delegate_id = ANY($1) ORDER BY id`,
    [delegateIds],
  );
  const by = new Map<string, AdmissionDbRow[]>();
  for (const a of rows) by.set(a.delegate_id, [...(by.get(a.delegate_id) ?? []), a]);
  return by;
}

export async function getDelegate(
  db: Queryable,
  agentId: string,
  delegateId: string,
): Promise<DelegateView | undefined> {
  const { rows } = await db.query<DelegateDbRow>(
    `SELECT d.*, c.conversation_id FROM delegates d JOIN conversations c ON c.key = d.conversation_key
      WHERE d.agent_id = $1 AND d.delegate_id = $2`,
    [agentId, delegateId],
  );
  const d = rows[0];
  if (!d) return undefined;
  return delegateViewOf(d, (await admissionsOf(db, [delegateId])).get(delegateId) ?? []);
}

/** Which delegates a list shows: `live` (not completed), `completed`, or those that ended with one outcome kind. */
export type DelegateFilter = 'live' | 'completed' | OutcomeKind;

/** An agent's delegates, newest first (ties by id, descending), each as getDelegate shows it. */
export async function listDelegates(
  db: Queryable,
  agentId: string,
  filter: { status?: DelegateFilter },
  page: PageRequest<{ at: string; delegateId: string }>,
): Promise<(DelegateView & { sortAt: string })[]> {
  const { rows } = await db.query<DelegateDbRow & { sort_at: string }>(
    `SELECT d.*, c.conversation_id, ${exactInstant('d.created_at')} AS sort_at
       FROM delegates d JOIN conversations c ON c.key = d.conversation_key
      WHERE d.agent_id = $1
        AND ($2::text IS NULL OR ($2 = 'live' AND d.completed_at IS NULL)
             OR ($2 = 'completed' AND d.completed_at IS NOT NULL) OR d.outcome_kind = $2)
        AND ($3::timestamptz IS NULL OR (d.created_at, d.delegate_id) < ($3::timestamptz, $4::text))
      ORDER BY d.created_at DESC, d.delegate_id DESC LIMIT $5`,
    [agentId, filter.status ?? null, page.after?.at ?? null, page.after?.delegateId ?? null, page.limit],
  );
  const admissions = await admissionsOf(
    db,
    rows.map((d) => d.delegate_id),
  );
  return rows.map((d) => ({ ...delegateViewOf(d, admissions.get(d.delegate_id) ?? []), sortAt: d.sort_at }));
}
