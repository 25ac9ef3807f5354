import type { HistoryMode, NewTask, TaskStatus } from '../domain/delegation';
import { userMayMoveTask } from '../domain/delegation';
import { ensureAgent, lockAgent } from './agents';
import { inTransaction, type Pool, type Queryable } from './pool';

// ---- tasks --------------------------------------------------------------------------------------------------------

export interface TaskRow {
  number: number;
  title: string;
  description: string;
  status: TaskStatus;
  requiredSkills: string[];
  historyMode: HistoryMode;
  wallClockSeconds: number;
  /** The tool servers its delegate may use; null: all of the agent's. */
  toolServers: string[] | null;
  createdAt: string;
  updatedAt: string;
}

/** A tasks row as PostgreSQL returns it. */
export interface TaskRecord {
  number: number;
  title: string;
  description: string;
  status: TaskStatus;
  required_skills: string[];
  history_mode: HistoryMode;
  wall_clock_seconds: number;
  tool_servers: string[] | null;
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
  toolServers: r.tool_servers,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/** Tasks are numbered per agent; the agent row is locked so two creations never share a number. */
export async function createTask(pool: Pool, agentId: string, t: NewTask): Promise<TaskRow> {
  return inTransaction(pool, async (db) => {
    await lockAgent(db, agentId);
    const { rows } = await db.query<TaskRecord>(
      `INSERT INTO tasks (agent_id, number, title, description, status, required_skills, history_mode,
         wall_clock_seconds, tool_servers)
       VALUES ($1, (SELECT COALESCE(max(number), 0) + 1 FROM tasks WHERE agent_id = $1), $2, $3, $4, $5, $6, $7, $8)
       RETURNING *`,
      [agentId, t.title, t.description, t.status, t.requiredSkills, t.historyMode, t.wallClockSeconds, t.toolServers],
    );
    return toTask(rows[0]!);
  });
}

/** The agent's task board in number order: at most `limit` tasks, those after number `after`. */
export async function listTasks(
  db: Queryable,
  agentId: string,
  page: { after?: number; limit: number },
): Promise<TaskRow[]> {
  const { rows } = await db.query<TaskRecord>(
    'SELECT * FROM tasks WHERE agent_id = $1 AND number > $2 ORDER BY number LIMIT $3',
    [agentId, page.after ?? 0, page.limit],
  );
  return rows.map(toTask);
}

export async function getTask(db: Queryable, agentId: string, number: number): Promise<TaskRow | undefined> {
  const { rows } = await db.query<TaskRecord>('SELECT * FROM tasks WHERE agent_id = $1 AND number = $2', [
    agentId,
    number,
  ]);
  return rows[0] ? toTask(rows[0]) : undefined;
}

/** The task's row, held until the transaction ends (a claim, a user's move). */
export async function lockTask(db: Queryable, agentId: string, number: number): Promise<TaskRecord | undefined> {
  const { rows } = await db.query<TaskRecord>('SELECT * FROM tasks WHERE agent_id = $1 AND number = $2 FOR UPDATE', [
    agentId,
    number,
  ]);
  return rows[0];
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
  const { rows } = await db.query<{
    attempt: number;
    delegate_id: string;
    started_at: Date;
    ended_at: Date | null;
    outcome: string | null;
    summary: string | null;
  }>('SELECT * FROM task_attempts WHERE agent_id = $1 AND task_number = $2 ORDER BY attempt', [agentId, number]);
  return rows.map((r) => ({
    attempt: r.attempt,
    delegateId: r.delegate_id,
    startedAt: r.started_at.toISOString(),
    endedAt: r.ended_at?.toISOString() ?? null,
    outcome: r.outcome,
    summary: r.summary,
  }));
}

export type MoveResult =
  { ok: true; task: TaskRow } | { ok: false; reason: 'not_found' | 'not_allowed'; from?: TaskStatus };

/**
 * A user's status change (approve: pending_approval → ready), within the transitions the domain allows. `moved` runs
 * in the same transaction once the status changed, with the status it had (the API records approvals there).
 */
export async function moveTask(
  pool: Pool,
  agentId: string,
  number: number,
  to: TaskStatus,
  moved?: (db: Queryable, from: TaskStatus) => Promise<void>,
): Promise<MoveResult> {
  return inTransaction(pool, async (db) => {
    const task = await lockTask(db, agentId, number);
    if (!task) return { ok: false, reason: 'not_found' };
    if (task.status !== to && !userMayMoveTask(task.status, to)) {
      return { ok: false, reason: 'not_allowed', from: task.status };
    }
    const updated = await db.query<TaskRecord>(
      'UPDATE tasks SET status = $3, updated_at = now() WHERE agent_id = $1 AND number = $2 RETURNING *',
      [agentId, number, to],
    );
    if (task.status !== to) await moved?.(db, task.status);
    return { ok: true, task: toTask(updated.rows[0]!) };
  });
}

export async function updateTaskDescription(
  db: Queryable,
  agentId: string,
  number: number,
  description: string,
): Promise<void> {
  await db.query('UPDATE tasks SET description = $3, updated_at = now() WHERE agent_id = $1 AND number = $2', [
    agentId,
    number,
    description,
  ]);
}

export async function addTaskComment(
  db: Queryable,
  agentId: string,
  number: number,
  delegateId: string,
  body: string,
): Promise<void> {
  await db.query('INSERT INTO task_comments (agent_id, task_number, delegate_id, body) VALUES ($1, $2, $3, $4)', [
    agentId,
    number,
    delegateId,
    body,
  ]);
}

// ---- skills a task may require ------------------------------------------------------------------------------------

export async function putSkill(
  pool: Pool,
  agentId: string,
  name: string,
  body: string,
): Promise<{ name: string; body: string; updatedAt: string }> {
  return inTransaction(pool, async (db) => {
    await ensureAgent(db, agentId);
    // Skill names are unique ignoring case: a PUT with other casing replaces the skill.
    await db.query('DELETE FROM skills WHERE agent_id = $1 AND lower(name) = lower($2) AND name <> $2', [
      agentId,
      name,
    ]);
    const { rows } = await db.query<{ name: string; body: string; updated_at: Date }>(
      `INSERT INTO skills (agent_id, name, body) VALUES ($1, $2, $3)
       ON CONFLICT (agent_id, name) DO UPDATE SET body = EXCLUDED.body, updated_at = now()
       RETURNING name, body, updated_at`,
      [agentId, name, body],
    );
    return { name: rows[0]!.name, body: rows[0]!.body, updatedAt: rows[0]!.updated_at.toISOString() };
  });
}

export async function findSkill(
  db: Queryable,
  agentId: string,
  name: string,
): Promise<{ name: string; body: string } | undefined> {
  const { rows } = await db.query<{ name: string; body: string }>(
    'SELECT name, body FROM skills WHERE agent_id = $1 AND lower(name) = lower($2)',
    [agentId, name],
  );
  return rows[0];
}

export async function skillNames(db: Queryable, agentId: string): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>('SELECT name FROM skills WHERE agent_id = $1 ORDER BY name', [
    agentId,
  ]);
  return rows.map((r) => r.name);
}
