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
  // An evaluation's cases copied the conversation's turns: they go with it (the evaluation's counts stay).
  `DELETE FROM eval_cases ec USING evals e, conversations c
    WHERE c.key = ANY($1) AND e.id = ec.eval_id AND e.agent_id = c.agent_id
      AND ec.spec->>'conversationId' = c.conversation_id`,
  'DELETE FROM conversation_forks WHERE conversation_key = ANY($1)',
  'DELETE FROM conversations WHERE key = ANY($1)',
];

/** Erases transcripts (a conversation's, a delegate's) and all that hangs on them, in one transaction. */
export async function eraseTranscripts(pool: Pool, keys: readonly string[]): Promise<void> {
  if (!keys.length) return;
  await inTransaction(pool, async (db) => {
    for (const sql of ERASE_TRANSCRIPTS) await db.query(sql, [keys]);
  });
}

/** Statements that erase what an agent owns once its transcripts are gone ($1: the agent's id). */
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
  'DELETE FROM routine_runs WHERE agent_id = $1',
  'DELETE FROM routine_tools WHERE agent_id = $1',
  'DELETE FROM routines WHERE agent_id = $1',
  'DELETE FROM app_records WHERE agent_id = $1',
  'DELETE FROM apps WHERE agent_id = $1',
  'DELETE FROM job_audit WHERE agent_id = $1',
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
  'DELETE FROM evals WHERE agent_id = $1',
  'DELETE FROM model_spend WHERE agent_id = $1',
  'DELETE FROM spend_totals WHERE agent_id = $1',
  'DELETE FROM workflow_task_failures WHERE agent_id = $1',
  'DELETE FROM tool_calls WHERE agent_id = $1',
  'DELETE FROM tool_servers WHERE agent_id = $1',
  'DELETE FROM agents WHERE id = $1',
];

/** Erases the agent's own rows (its transcripts erased first), in one transaction. */
export async function eraseAgentRows(pool: Pool, agentId: string): Promise<void> {
  await inTransaction(pool, async (db) => {
    for (const sql of ERASE_AGENT) await db.query(sql, [agentId]);
  });
}

/** Whether the agent (or its conversation) is there to delete. */
export async function existsToDelete(db: Queryable, agentId: string, conversationId?: string): Promise<boolean> {
  const { rowCount } = conversationId
    ? await db.query('SELECT 1 FROM conversations WHERE key = $1', [conversationWorkflowId(agentId, conversationId)])
    : await db.query('SELECT 1 FROM agents WHERE id = $1', [agentId]);
  return rowCount !== 0;
}
