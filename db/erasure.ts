import type pg from 'pg';
import { conversationWorkflowId, delegateWorkflowId } from '../domain/ids';
import { inTransaction, type Pool, type Queryable } from './pool';

/**
 * What a deletion erases from PostgreSQL. The effects ledger keeps every key and status (so a late retry of an effect
 * still finds it settled and cannot send again) and loses its content: the request, and any result but a delivery's
 * report, which holds no content. The audit trail is kept whole. Each step is idempotent: a deletion that crashed
 * halfway runs it again.
 */

/**
 * The transcripts a conversation's deletion erases: its own and its forks' (copies of its turns, a fork's forks too),
 * and those of the delegates any of them spawned.
 */
export async function transcriptsOfConversation(db: Queryable, agentId: string, conversationId: string) {
  const key = conversationWorkflowId(agentId, conversationId);
  const conversations = [key, ...(await forksOf(db, key))];
  // A delegate's workflow id is also the key of its own transcript.
  const delegates = await Promise.all(conversations.map((k) => delegateWorkflowsOf(db, agentId, k)));
  return [...conversations, ...delegates.flat()];
}

/** The conversations forked from a conversation, and from its forks (each one's key is its workflow id). */
export async function forksOf(db: Queryable, conversationKey: string): Promise<string[]> {
  const { rows } = await db.query<{ key: string }>(
    `WITH RECURSIVE forked AS (
       SELECT conversation_key FROM conversation_forks WHERE source_key = $1
       UNION SELECT f.conversation_key FROM conversation_forks f JOIN forked ON f.source_key = forked.conversation_key)
     SELECT conversation_key AS key FROM forked ORDER BY 1`,
    [conversationKey],
  );
  return rows.map((r) => r.key);
}

/** Every transcript of the agent's: its conversations', its delegates', its jobs' and its routines'. */
export async function transcriptsOfAgent(db: Queryable, agentId: string): Promise<string[]> {
  const { rows } = await db.query<{ key: string }>('SELECT key FROM conversations WHERE agent_id = $1', [agentId]);
  return rows.map((r) => r.key);
}

/** The workflows of an agent's delegates spawned by a conversation (or by any of the agent's, without one). */
export async function delegateWorkflowsOf(db: Queryable, agentId: string, conversationKey?: string) {
  const { rows } = await db.query<{ delegate_id: string }>(
    'SELECT delegate_id FROM delegates WHERE agent_id = $1 AND ($2::text IS NULL OR conversation_key = $2)',
    [agentId, conversationKey ?? null],
  );
  return rows.map((r) => delegateWorkflowId(agentId, r.delegate_id));
}

/** The Schedules of the agent's jobs and routines, by their rows. */
export async function schedulesOfAgent(db: Queryable, agentId: string) {
  const { rows } = await db.query<{ id: string; app_id: string | null; slug: string | null }>(
    `SELECT id, NULL AS app_id, NULL AS slug FROM jobs WHERE agent_id = $1
     UNION ALL SELECT NULL, app_id, slug FROM routines WHERE agent_id = $1`,
    [agentId],
  );
  return rows;
}

const DELEGATES_OF = 'SELECT delegate_id FROM delegates WHERE conversation_key = ANY($1)';
/** An evaluation's cases that copied the turns of one of the conversations. */
const CASES_OF = `SELECT ec.eval_id, ec.case_id FROM eval_cases ec JOIN evals e ON e.id = ec.eval_id
  JOIN conversations c ON c.agent_id = e.agent_id AND ec.spec->>'conversationId' = c.conversation_id
  WHERE c.key = ANY($1)`;
/** The agent's evaluations' cases ($1: the agent's id). */
const AGENT_CASES =
  'SELECT ec.eval_id, ec.case_id FROM eval_cases ec JOIN evals e ON e.id = ec.eval_id WHERE e.agent_id = $1';

/** Statements that erase transcripts ($1: their keys), children before parents. */
const ERASE_TRANSCRIPTS = [
  'DELETE FROM deliveries WHERE conversation_key = ANY($1)',
  `UPDATE effects SET request = '{}'::jsonb,
          result = CASE WHEN kind = 'delivery' THEN result ELSE jsonb_build_object('erased', true) END
    WHERE EXISTS (SELECT 1 FROM unnest($1::text[]) k WHERE starts_with(effects.key, k || '/'))
      AND request <> '{}'::jsonb`,
  'DELETE FROM conversation_events WHERE conversation_key = ANY($1)',
  'DELETE FROM model_calls WHERE conversation_key = ANY($1)',
  'DELETE FROM scripted_responses WHERE conversation_key = ANY($1)',
  'DELETE FROM turn_tool_lists WHERE turn_id IN (SELECT turn_id FROM turns WHERE conversation_key = ANY($1))',
  'DELETE FROM tool_calls WHERE conversation_key = ANY($1)',
  `DELETE FROM delegate_admissions WHERE delegate_id IN (${DELEGATES_OF})`,
  `DELETE FROM task_attempts WHERE delegate_id IN (${DELEGATES_OF})`,
  `DELETE FROM task_comments WHERE delegate_id IN (${DELEGATES_OF})`,
  'DELETE FROM delegates WHERE conversation_key = ANY($1)',
  'DELETE FROM messages WHERE conversation_key = ANY($1)',
  'DELETE FROM inbound_messages WHERE conversation_key = ANY($1)',
  'DELETE FROM turns WHERE conversation_key = ANY($1)',
  `DELETE FROM reflection_gate_log g USING conversations c
    WHERE c.key = ANY($1) AND g.agent_id = c.agent_id AND g.conversation_id = c.conversation_id`,
  `DELETE FROM reflection_poison p USING conversations c
    WHERE c.key = ANY($1) AND p.agent_id = c.agent_id AND p.conversation_id = c.conversation_id`,
  'DELETE FROM workflow_task_failures WHERE workflow_id = ANY($1)',
  // An evaluation's cases copied the conversation's turns: they go with it (the evaluation's counts stay). What hangs
  // on a case is erased first, as each statement counts its own rows (a cascade's would go uncounted).
  `DELETE FROM eval_model_answers WHERE (eval_id, case_id) IN (${CASES_OF})`,
  `DELETE FROM eval_turns WHERE (eval_id, case_id) IN (${CASES_OF})`,
  `DELETE FROM eval_cases ec USING evals e, conversations c
    WHERE c.key = ANY($1) AND e.id = ec.eval_id AND e.agent_id = c.agent_id
      AND ec.spec->>'conversationId' = c.conversation_id`,
  'DELETE FROM conversation_forks WHERE conversation_key = ANY($1)',
  'DELETE FROM conversations WHERE key = ANY($1)',
];

/** Runs erasing statements in one transaction; answers how many rows they erased (or emptied, in the ledger). */
async function erase(pool: Pool, statements: readonly string[], param: unknown): Promise<number> {
  return inTransaction(pool, async (db) => {
    let rows = 0;
    for (const sql of statements) rows += (await db.query(sql, [param])).rowCount ?? 0;
    return rows;
  });
}

/** Erases transcripts (a conversation's, a delegate's) and all that hangs on them; answers how many rows. */
export async function eraseTranscripts(pool: Pool, keys: readonly string[]): Promise<number> {
  return keys.length ? erase(pool, ERASE_TRANSCRIPTS, keys) : 0;
}

/**
 * Statements that erase what an agent owns once its transcripts are gone ($1: the agent's id), children before
 * parents, also where a foreign key would cascade: each statement counts its own rows.
 */
const ERASE_AGENT = [
  `UPDATE effects SET request = '{}'::jsonb,
          result = CASE WHEN kind = 'delivery' THEN result ELSE jsonb_build_object('erased', true) END
    WHERE request <> '{}'::jsonb AND (
          key IN (SELECT d.effect_key FROM deliveries d JOIN job_runs r ON starts_with(d.effect_key, r.run_id || '/')
                    JOIN jobs j ON j.id = r.job_id WHERE j.agent_id = $1)
       OR starts_with(key, 'budget-notice:' || $1 || ':'))`,
  `DELETE FROM deliveries WHERE effect_key IN (
     SELECT d.effect_key FROM deliveries d JOIN job_runs r ON starts_with(d.effect_key, r.run_id || '/')
       JOIN jobs j ON j.id = r.job_id WHERE j.agent_id = $1)`,
  'DELETE FROM routine_artifacts WHERE agent_id = $1',
  'DELETE FROM routine_calls WHERE run_id IN (SELECT run_id FROM routine_runs WHERE agent_id = $1)',
  'DELETE FROM routine_runs WHERE agent_id = $1',
  'DELETE FROM routine_tools WHERE agent_id = $1',
  'DELETE FROM routines WHERE agent_id = $1',
  'DELETE FROM app_records WHERE agent_id = $1',
  'DELETE FROM apps WHERE agent_id = $1',
  'DELETE FROM job_audit WHERE agent_id = $1',
  'DELETE FROM job_runs WHERE job_id IN (SELECT id FROM jobs WHERE agent_id = $1)',
  'DELETE FROM jobs WHERE agent_id = $1',
  'DELETE FROM delegate_admissions WHERE delegate_id IN (SELECT delegate_id FROM delegates WHERE agent_id = $1)',
  'DELETE FROM task_attempts WHERE agent_id = $1',
  'DELETE FROM task_comments WHERE agent_id = $1',
  'DELETE FROM delegates WHERE agent_id = $1',
  'DELETE FROM tasks WHERE agent_id = $1',
  'DELETE FROM skills WHERE agent_id = $1',
  'DELETE FROM memory_versions WHERE agent_id = $1',
  'DELETE FROM proposals WHERE agent_id = $1',
  'DELETE FROM reflection_poison WHERE agent_id = $1',
  'DELETE FROM reflection_gate_log WHERE agent_id = $1',
  'DELETE FROM reflection_costs WHERE agent_id = $1',
  `DELETE FROM eval_model_answers WHERE (eval_id, case_id) IN (${AGENT_CASES})`,
  `DELETE FROM eval_turns WHERE (eval_id, case_id) IN (${AGENT_CASES})`,
  'DELETE FROM eval_cases WHERE eval_id IN (SELECT id FROM evals WHERE agent_id = $1)',
  'DELETE FROM evals WHERE agent_id = $1',
  'DELETE FROM model_spend WHERE agent_id = $1',
  'DELETE FROM spend_totals WHERE agent_id = $1',
  'DELETE FROM workflow_task_failures WHERE agent_id = $1',
  'DELETE FROM tool_calls WHERE agent_id = $1',
  'DELETE FROM tool_servers WHERE agent_id = $1',
  'DELETE FROM agents WHERE id = $1',
];

/** Erases the agent's own rows (its transcripts erased first), in one transaction; answers how many. */
export async function eraseAgentRows(pool: Pool, agentId: string): Promise<number> {
  return erase(pool, ERASE_AGENT, agentId);
}

/** Whether the agent (or its conversation) is there to delete. */
export async function existsToDelete(db: Queryable, agentId: string, conversationId?: string): Promise<boolean> {
  const { rowCount } = conversationId
    ? await db.query('SELECT 1 FROM conversations WHERE key = $1', [conversationWorkflowId(agentId, conversationId)])
    : await db.query('SELECT 1 FROM agents WHERE id = $1', [agentId]);
  return rowCount !== 0;
}

/** A deletion from its request until its last step (running_deletions): what it deletes refuses every write. */
export interface RunningDeletion {
  deletionId: string;
  agentId: string;
  /** The conversation deleted; null when the whole agent is. */
  conversationId: string | null;
  actor: string;
}

const RUNNING_DELETION =
  'deletion_id AS "deletionId", agent_id AS "agentId", conversation_id AS "conversationId", actor';

/**
 * The deletion running for the agent, or (given conversations) for the agent or one of them, the agent's first: the
 * one query the API's guard asks before every write (api/deletion-guard.ts).
 */
export async function runningDeletion(
  db: Queryable,
  agentId: string,
  conversationIds: readonly string[] = [],
): Promise<RunningDeletion | undefined> {
  const { rows } = await db.query<RunningDeletion>(
    `SELECT ${RUNNING_DELETION} FROM running_deletions
      WHERE agent_id = $1 AND (conversation_id IS NULL OR conversation_id = ANY($2::text[]))
      ORDER BY conversation_id NULLS FIRST LIMIT 1`,
    [agentId, conversationIds],
  );
  return rows[0];
}

/**
 * The conversation and every conversation it was forked from, nearest first: a conversation's deletion erases its
 * forks, so a write to a fork is a write to each of them.
 */
export async function lineageOf(db: Queryable, agentId: string, conversationId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `WITH RECURSIVE lineage(key, depth) AS (
       SELECT key, 0 FROM conversations WHERE agent_id = $1 AND conversation_id = $2
       UNION SELECT f.source_key, l.depth + 1 FROM conversation_forks f JOIN lineage l ON f.conversation_key = l.key)
     SELECT c.conversation_id AS id FROM lineage JOIN conversations c ON c.key = lineage.key
      WHERE lineage.depth > 0 ORDER BY lineage.depth`,
    [agentId, conversationId],
  );
  return [conversationId, ...rows.map((r) => r.id).filter((id) => id !== conversationId)];
}

/**
 * Marks a deletion as running (again, idempotent for its own id); answers the deletion that runs for what it deletes:
 * this one, or one asked for just before (one runs at a time for each agent and each conversation).
 */
export async function markDeletion(
  db: Queryable,
  d: { deletionId: string; agentId: string; conversationId?: string; actor: string },
): Promise<RunningDeletion> {
  for (;;) {
    const { rows } = await db.query<RunningDeletion>(
      `INSERT INTO running_deletions (deletion_id, agent_id, conversation_id, actor) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING RETURNING ${RUNNING_DELETION}`,
      [d.deletionId, d.agentId, d.conversationId ?? null, d.actor],
    );
    if (rows[0]) return rows[0];
    // The conflicting row has committed (the insert waited for it), so this statement's snapshot has it, unless that
    // deletion has finished since: then mark again.
    const { rows: running } = await db.query<RunningDeletion>(
      `SELECT ${RUNNING_DELETION} FROM running_deletions
        WHERE deletion_id = $1 OR (agent_id = $2 AND COALESCE(conversation_id, '') = COALESCE($3, ''))
        ORDER BY deletion_id = $1 DESC LIMIT 1`,
      [d.deletionId, d.agentId, d.conversationId ?? null],
    );
    if (running[0]) return running[0];
  }
}

/** The deletion is over: what it deleted takes writes again (and the agent may be created anew). */
export async function unmarkDeletion(db: Queryable, deletionId: string): Promise<void> {
  await db.query('DELETE FROM running_deletions WHERE deletion_id = $1', [deletionId]);
}

/**
 * The advisory lock that writes to the agent (or to one of its conversations) hold, shared, while they run, and that
 * its deletion takes, exclusive, to wait them out. Agent ids hold no ':', so the two kinds never share a name.
 */
export const writeLockName = (agentId: string, conversationId?: string) =>
  `deletion:${conversationId === undefined ? agentId : conversationWorkflowId(agentId, conversationId)}`;

/** Takes the lock, shared, for the session; false, without waiting, when a deletion holds it or waits for it. */
export async function tryShareWriteLock(db: pg.ClientBase, name: string): Promise<boolean> {
  const { rows } = await db.query<{ held: boolean }>(
    'SELECT pg_try_advisory_lock_shared(hashtextextended($1, 0)) AS held',
    [name],
  );
  return rows[0]!.held;
}

/** Gives back one of the session's shared holds of the lock. */
export async function unshareWriteLock(db: pg.ClientBase, name: string): Promise<void> {
  await db.query('SELECT pg_advisory_unlock_shared(hashtextextended($1, 0))', [name]);
}

/** Waits until no write holds the lock: every write that began before the deletion was marked has ended. */
export async function waitOutWrites(pool: Pool, name: string): Promise<void> {
  await inTransaction(pool, (db) => db.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [name]));
}
