import type { ScriptedResponse } from '../domain/scripted-model';
import type { Pool, Queryable } from './pool';

/** Queues an exact response for the scripted model in one conversation (tests and demos). */
export async function queueScriptedResponse(
  db: Queryable,
  conversationKey: string,
  response: ScriptedResponse,
): Promise<void> {
  await db.query('INSERT INTO scripted_responses (conversation_key, response) VALUES ($1, $2)', [
    conversationKey,
    JSON.stringify(response),
  ]);
}

/**
 * Takes the oldest queued response for the conversation, once per model call: a retried call (same `callKey`)
 * gets the response it took before.
 */
export async function takeScriptedResponse(
  pool: Pool,
  conversationKey: string,
  callKey: string,
): Promise<ScriptedResponse | undefined> {
  const { rows } = await pool.query<{ response: ScriptedResponse }>(
    `WITH mine AS (SELECT response FROM scripted_responses WHERE consumed_by = $2),
          next AS (
            UPDATE scripted_responses SET consumed_by = $2
             WHERE id = (SELECT id FROM scripted_responses WHERE conversation_key = $1 AND consumed_by IS NULL
                          ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
               AND NOT EXISTS (SELECT 1 FROM mine)
             RETURNING response)
     SELECT response FROM mine UNION ALL SELECT response FROM next`,
    [conversationKey, callKey],
  );
  return rows[0]?.response;
}
