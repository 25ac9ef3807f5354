import type { AdmittedResult, DelegateFinished, HistoryMode, NewTask, OutcomeKind, TaskStatus, TerminalOwner } from '../domain/delegation';
import { DELEGATION, taskRefusal, taskStatusAfter, terminalLifecycle, userMayMoveTask } from '../domain/delegation';
import { ensureAgent } from './agents';
import type { PoolClient } from 'pg';
import { inTransaction, type Pool, type Queryable } from './pool';

// ---- tasks and skills ---------------------------------------------------------------------------------------------

export interface TaskRow {
  number: number;
  title: string;
  description: string;
  status: TaskStatus;
  requiredSkills: string[];
  historyMode: HistoryMode;
  wallClockSeconds: number;
  createdAt: string;
  updatedAt: string;
}

interface TaskRecord {
  number: number;
  title: string;
  description: string;
  status: TaskStatus;
  required_skills: string[];
  history_mode: HistoryMode;
  wall_clock_seconds: number;
  created_at: Date;
  updated_at: Date;
}

const toTask = (r: TaskRecord): TaskRow => ({
  number: r.number,
  title: r.title,
  description: r.description,
  status: r.status,
  requiredSkills: r.required_skills,
  historyMode: r.history_mode,
  wallClockSeconds: r.wall_clock_seconds,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/** Tasks are numbered per agent; the agent row is locked so two creations never share a number. */
export async function createTask(pool: Pool, agentId: string, t: NewTask): Promise<TaskRow> {
  return inTransaction(pool, async (db) => {
    await ensureAgent(db, agentId);
    await db.query('SELECT 1 FROM agents WHERE id = $1 FOR UPDATE', [agentId]);
    const { rows } = await db.query<TaskRecord>(
      `INSERT INTO tasks (agent_id, number, title, description, status, required_skills, history_mode, wall_clock_seconds)
       VALUES ($1, (SELECT COALESCE(max(number), 0) + 1 FROM tasks WHERE agent_id = $1), $2, $3, $4, $5, $6, $7) RETURNING *`,
      [agentId, t.title, t.description, t.status, t.requiredSkills, t.historyMode, t.wallClockSeconds],
    );
    return toTask(rows[0]!);
  });
}

export async function getTask(db: Queryable, agentId: string, number: number): Promise<TaskRow | undefined> {
  const { rows } = await db.query<TaskRecord>('SELECT * FROM tasks WHERE agent_id = $1 AND number = $2', [agentId, number]);
  return rows[0] ? toTask(rows[0]) : undefined;
}

export interface AttemptRow {
  attempt: number;
  delegateId: string;
  startedAt: string;
  endedAt: string | null;
  outcome: string | null;
  summary: string | null;
}

export async function taskAttempts(db: Queryable, agentId: string, number: number): Promise<AttemptRow[]> {
  const { rows } = await db.query<{ attempt: number; delegate_id: string; started_at: Date; ended_at: Date | null; outcome: string | null; summary: string | null }>(
    'SELECT * FROM task_attempts WHERE agent_id = $1 AND task_number = $2 ORDER BY attempt',
    [agentId, number],
  );
  return rows.map((r) => ({
    attempt: r.attempt,
    delegateId: r.delegate_id,
    startedAt: r.started_at.toISOString(),
    endedAt: r.ended_at?.toISOString() ?? null,
    outcome: r.outcome,
    summary: r.summary,
  }));
}

export type MoveResult = { ok: true; task: TaskRow } | { ok: false; reason: 'not_found' | 'not_allowed'; from?: TaskStatus };

/** A user's status change (approve: pending_approval → ready), within the transitions the domain allows. */
export async function moveTask(pool: Pool, agentId: string, number: number, to: TaskStatus): Promise<MoveResult> {
  return inTransaction(pool, async (db) => {
    const { rows } = await db.query<TaskRecord>('SELECT * FROM tasks WHERE agent_id = $1 AND number = $2 FOR UPDATE', [agentId, number]);
    const task = rows[0];
    if (!task) return { ok: false, reason: 'not_found' };
    if (task.status !== to && !userMayMoveTask(task.status, to)) return { ok: false, reason: 'not_allowed', from: task.status };
    const updated = await db.query<TaskRecord>('UPDATE tasks SET status = $3, updated_at = now() WHERE agent_id = $1 AND number = $2 RETURNING *', [agentId, number, to]);
    return { ok: true, task: toTask(updated.rows[0]!) };
  });
}

export async function putSkill(pool: Pool, agentId: string, name: string, body: string): Promise<{ name: string; body: string; updatedAt: string }> {
  return inTransaction(pool, async (db) => {
    await ensureAgent(db, agentId);
    // Skill names are unique ignoring case: a PUT with other casing replaces the skill.
    await db.query('DELETE FROM skills WHERE agent_id = $1 AND lower(name) = lower($2) AND name <> $2', [agentId, name]);
    const { rows } = await db.query<{ name: string; body: string; updated_at: Date }>(
      `INSERT INTO skills (agent_id, name, body) VALUES ($1, $2, $3)
       ON CONFLICT (agent_id, name) DO UPDATE SET body = EXCLUDED.body, updated_at = now() RETURNING name, body, updated_at`,
      [agentId, name, body],
    );
    return { name: rows[0]!.name, body: rows[0]!.body, updatedAt: rows[0]!.updated_at.toISOString() };
  });
}

export async function findSkill(db: Queryable, agentId: string, name: string): Promise<{ name: string; body: string } | undefined> {
  const { rows } = await db.query<{ name: string; body: string }>('SELECT name, body FROM skills WHERE agent_id = $1 AND lower(name) = lower($2)', [agentId, name]);
  return rows[0];
}

export async function skillNames(db: Queryable, agentId: string): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>('SELECT name FROM skills WHERE agent_id = $1 ORDER BY name', [agentId]);
  return rows.map((r) => r.name);
}

export async function updateTaskDescription(db: Queryable, agentId: string, number: number, description: string): Promise<void> {
  await db.query('UPDATE tasks SET description = $3, updated_at = now() WHERE agent_id = $1 AND number = $2', [agentId, number, description]);
}

export async function addTaskComment(db: Queryable, agentId: string, number: number, delegateId: string, body: string): Promise<void> {
  await db.query('INSERT INTO task_comments (agent_id, task_number, delegate_id, body) VALUES ($1, $2, $3, $4)', [agentId, number, delegateId, body]);
}

// ---- admission of a delegate (the claim) --------------------------------------------------------------------------

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
    const mine = await db.query<{ task_number: number | null; wall_clock_seconds: number }>('SELECT task_number, wall_clock_seconds FROM delegates WHERE delegate_id = $1', [
      r.delegateId,
    ]);
    if (mine.rows[0]) return { kind: 'spawned', delegateId: r.delegateId, taskNumber: mine.rows[0].task_number, wallClockSeconds: mine.rows[0].wall_clock_seconds };

    // One claim at a time per conversation: the live count below stays true until this transaction ends.
    await db.query('SELECT 1 FROM conversations WHERE key = $1 FOR UPDATE', [r.conversationKey]);
    let taskText: string;
    let historyMode: HistoryMode = r.historyMode ?? 'fork';
    let wallClockSeconds: number = DELEGATION.defaultWallClockSeconds;
    if (r.task !== undefined) {
      const { rows } = await db.query<TaskRecord>('SELECT * FROM tasks WHERE agent_id = $1 AND number = $2 FOR UPDATE', [r.agentId, r.task]);
      const task = rows[0];
      if (!task) return { kind: 'refused', reason: `task #${r.task} not found` };
      const refusal = taskRefusal(task.number, task.status);
      if (refusal) return { kind: 'refused', reason: refusal };
      const open = await db.query<{ delegate_id: string }>('SELECT delegate_id FROM task_attempts WHERE agent_id = $1 AND task_number = $2 AND ended_at IS NULL', [
        r.agentId,
        r.task,
      ]);
      if (open.rows[0]) return { kind: 'refused', reason: `task #${r.task} already has an open attempt (delegate ${open.rows[0].delegate_id})` };
      const unknown: string[] = [];
      for (const name of task.required_skills) if (!(await findSkill(db, r.agentId, name))) unknown.push(name);
      if (unknown.length) return { kind: 'refused', reason: `task #${r.task} requires unknown skill(s): ${unknown.join(', ')}` };
      taskText = task.title;
      historyMode = r.historyMode ?? task.history_mode;
      wallClockSeconds = task.wall_clock_seconds;
    } else {
      taskText = r.text ?? '';
      // The same ad-hoc task already running: hand back that delegate rather than start a second one.
      const same = await db.query<{ delegate_id: string }>(
        'SELECT delegate_id FROM delegates WHERE conversation_key = $1 AND task_number IS NULL AND task_text = $2 AND completed_at IS NULL LIMIT 1',
        [r.conversationKey, taskText],
      );
      if (same.rows[0]) return { kind: 'existing', delegateId: same.rows[0].delegate_id };
    }
    const live = await db.query<{ n: string }>('SELECT count(*) AS n FROM delegates WHERE conversation_key = $1 AND completed_at IS NULL', [r.conversationKey]);
    if (Number(live.rows[0]!.n) >= DELEGATION.maxLiveDelegatesPerConversation) {
      return { kind: 'refused', reason: `at most ${DELEGATION.maxLiveDelegatesPerConversation} delegates may run at once in a conversation; wait for one to finish or cancel one` };
    }

    await db.query(
      `INSERT INTO delegates (delegate_id, agent_id, conversation_key, task_number, task_text, history_mode, wall_clock_seconds)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [r.delegateId, r.agentId, r.conversationKey, r.task ?? null, taskText, historyMode, wallClockSeconds],
    );
    if (r.task !== undefined) {
      await db.query(
        `INSERT INTO task_attempts (agent_id, task_number, attempt, delegate_id)
         VALUES ($1, $2, (SELECT COALESCE(max(attempt), 0) + 1 FROM task_attempts WHERE agent_id = $1 AND task_number = $2), $3)`,
        [r.agentId, r.task, r.delegateId],
      );
      await db.query(`UPDATE tasks SET status = 'in_progress', updated_at = now() WHERE agent_id = $1 AND number = $2 AND status = 'ready'`, [r.agentId, r.task]);
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
}

export async function delegateBrief(db: Queryable, delegateId: string): Promise<DelegateBrief> {
  const { rows } = await db.query<{
    agent_id: string;
    conversation_key: string;
    task_number: number | null;
    task_text: string;
    history_mode: HistoryMode;
    wall_clock_seconds: number;
  }>('SELECT agent_id, conversation_key, task_number, task_text, history_mode, wall_clock_seconds FROM delegates WHERE delegate_id = $1', [delegateId]);
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
  };
}

export interface CommittedOutcome extends DelegateFinished {
  result: string;
  conversationKey: string;
  /** True when this call's write won; false when another writer had committed first (its outcome is returned). */
  won: boolean;
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
      await db.query(`UPDATE tasks SET status = $3, updated_at = now() WHERE agent_id = $1 AND number = $2 AND status = 'in_progress'`, [
        d.agent_id,
        d.task_number,
        taskStatusAfter(d.outcome_kind),
      ]);
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

// ---- admission in the conversation --------------------------------------------------------------------------------

export type AdmissionDecision = 'admitted' | 'ignored:consumed' | 'rejected:not_committed' | 'rejected:other_conversation' | 'rejected:mismatch' | 'rejected:unknown';

/**
 * Admits a delegate's outcome once: the durable row is re-read, the signal's four fields must match it, and a
 * version already consumed is ignored. The result text comes from the row, never from the signal.
 */
export async function admitOutcome(
  pool: Pool,
  conversationKey: string,
  claim: DelegateFinished,
  via: 'signal' | 'reconcile',
  batch: string,
  /** Runs in the admitting transaction, so that what admission records (a transcript note) commits with it. */
  onAdmitted: (db: PoolClient, result: AdmittedResult) => Promise<void>,
): Promise<{ decision: AdmissionDecision; result?: AdmittedResult }> {
  return inTransaction(pool, async (db) => {
    const { rows } = await db.query<{
      conversation_key: string;
      outcome_kind: OutcomeKind | null;
      result: string | null;
      outcome_version: number;
      transcript_version: number;
      terminal_owner: TerminalOwner | null;
      admitted_version: number;
      completed_at: Date | null;
    }>('SELECT * FROM delegates WHERE delegate_id = $1 FOR UPDATE', [claim.delegateId]);
    const d = rows[0];
    let decision: AdmissionDecision;
    if (!d) decision = 'rejected:unknown';
    else if (d.conversation_key !== conversationKey) decision = 'rejected:other_conversation';
    else if (!d.completed_at || d.outcome_version === 0) decision = 'rejected:not_committed';
    else if (claim.outcomeVersion <= d.admitted_version) decision = 'ignored:consumed';
    else if (
      d.outcome_version !== claim.outcomeVersion ||
      d.transcript_version !== claim.transcriptVersion ||
      d.outcome_kind !== claim.outcomeKind ||
      d.terminal_owner !== claim.terminalOwner
    ) {
      decision = 'rejected:mismatch';
    } else decision = 'admitted';
    if (d) {
      await db.query('INSERT INTO delegate_admissions (delegate_id, outcome_version, decision, via, batch) VALUES ($1, $2, $3, $4, $5)', [
        claim.delegateId,
        claim.outcomeVersion,
        decision,
        via,
        batch,
      ]);
    }
    if (decision !== 'admitted' || !d) return { decision };
    await db.query('UPDATE delegates SET admitted_version = outcome_version, admitted_at = now() WHERE delegate_id = $1', [claim.delegateId]);
    const result: AdmittedResult = { delegateId: claim.delegateId, kind: d.outcome_kind!, result: d.result ?? '' };
    await onAdmitted(db, result);
    return { decision, result };
  });
}

/** What an earlier attempt of the same admission call admitted (its reply to the workflow was lost). */
export async function admittedInBatch(db: Queryable, batch: string): Promise<string[]> {
  const { rows } = await db.query<{ delegate_id: string }>(`SELECT delegate_id FROM delegate_admissions WHERE batch = $1 AND decision = 'admitted' ORDER BY id`, [batch]);
  return rows.map((r) => r.delegate_id);
}

/** Admitted results no retrigger relayed or noted: after a run was terminated, a fresh run relays them. */
export async function unrelayedResults(db: Queryable, conversationKey: string): Promise<string[]> {
  const { rows } = await db.query<{ delegate_id: string }>(
    `SELECT delegate_id FROM delegates WHERE conversation_key = $1 AND admitted_version > 0 AND admitted_version = outcome_version AND relay IS NULL ORDER BY admitted_at`,
    [conversationKey],
  );
  return rows.map((r) => r.delegate_id);
}

/** Committed outcomes of the conversation that were never admitted (their signal was lost or not yet handled). */
export async function unadmittedOutcomes(db: Queryable, conversationKey: string): Promise<DelegateFinished[]> {
  const { rows } = await db.query<{ delegate_id: string; outcome_version: number; transcript_version: number; outcome_kind: OutcomeKind; terminal_owner: TerminalOwner }>(
    `SELECT delegate_id, outcome_version, transcript_version, outcome_kind, terminal_owner FROM delegates
      WHERE conversation_key = $1 AND completed_at IS NOT NULL AND admitted_version < outcome_version ORDER BY completed_at`,
    [conversationKey],
  );
  return rows.map((r) => ({
    delegateId: r.delegate_id,
    outcomeVersion: r.outcome_version,
    transcriptVersion: r.transcript_version,
    outcomeKind: r.outcome_kind,
    terminalOwner: r.terminal_owner,
  }));
}

export async function liveDelegateIds(db: Queryable, conversationKey: string): Promise<string[]> {
  const { rows } = await db.query<{ delegate_id: string }>('SELECT delegate_id FROM delegates WHERE conversation_key = $1 AND completed_at IS NULL ORDER BY created_at', [
    conversationKey,
  ]);
  return rows.map((r) => r.delegate_id);
}

/** Live delegates with what a sweep needs to find their workflows. */
export async function liveDelegates(db: Queryable, conversationKey: string): Promise<{ delegateId: string; agentId: string; ageMs: number }[]> {
  const { rows } = await db.query<{ delegate_id: string; agent_id: string; age_ms: string }>(
    `SELECT delegate_id, agent_id, (extract(epoch FROM now() - created_at) * 1000)::bigint AS age_ms FROM delegates WHERE conversation_key = $1 AND completed_at IS NULL`,
    [conversationKey],
  );
  return rows.map((r) => ({ delegateId: r.delegate_id, agentId: r.agent_id, ageMs: Number(r.age_ms) }));
}

export async function admittedResults(db: Queryable, delegateIds: readonly string[]): Promise<AdmittedResult[]> {
  const { rows } = await db.query<{ delegate_id: string; outcome_kind: OutcomeKind; result: string }>(
    'SELECT delegate_id, outcome_kind, result FROM delegates WHERE delegate_id = ANY($1)',
    [delegateIds],
  );
  const byId = new Map(rows.map((r) => [r.delegate_id, r]));
  return delegateIds.flatMap((id) => {
    const r = byId.get(id);
    return r ? [{ delegateId: id, kind: r.outcome_kind, result: r.result }] : [];
  });
}

export async function markRelay(db: Queryable, delegateIds: readonly string[], relay: 'relayed' | 'relay_failed' | 'noted'): Promise<void> {
  await db.query('UPDATE delegates SET relay = $2 WHERE delegate_id = ANY($1)', [delegateIds, relay]);
}

export interface DelegateView {
  delegateId: string;
  conversationId: string;
  taskNumber?: number;
  lifecycle: string;
  outcome?: { kind: OutcomeKind; result: string; outcomeVersion: number; transcriptVersion: number; terminalOwner: TerminalOwner };
  admittedAt?: string;
  relay?: string;
  admissions: { outcomeVersion: number; decision: string; via: string; at: string }[];
}

export async function getDelegate(db: Queryable, agentId: string, delegateId: string): Promise<DelegateView | undefined> {
  const { rows } = await db.query<{
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
    conversation_id: string;
  }>(
    `SELECT d.*, c.conversation_id FROM delegates d JOIN conversations c ON c.key = d.conversation_key WHERE d.agent_id = $1 AND d.delegate_id = $2`,
    [agentId, delegateId],
  );
  const d = rows[0];
  if (!d) return undefined;
  const admissions = await db.query<{ outcome_version: number; decision: string; via: string; at: Date }>(
    'SELECT outcome_version, decision, via, at FROM delegate_admissions WHERE delegate_id = $1 ORDER BY id',
    [delegateId],
  );
  return {
    delegateId: d.delegate_id,
    conversationId: d.conversation_id,
    ...(d.task_number !== null ? { taskNumber: d.task_number } : {}),
    lifecycle: d.lifecycle,
    ...(d.outcome_kind
      ? { outcome: { kind: d.outcome_kind, result: d.result ?? '', outcomeVersion: d.outcome_version, transcriptVersion: d.transcript_version, terminalOwner: d.terminal_owner! } }
      : {}),
    ...(d.admitted_at ? { admittedAt: d.admitted_at.toISOString() } : {}),
    ...(d.relay ? { relay: d.relay } : {}),
    admissions: admissions.rows.map((a) => ({ outcomeVersion: a.outcome_version, decision: a.decision, via: a.via, at: a.at.toISOString() })),
  };
}
