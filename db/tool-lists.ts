import type { PinnedTool } from '../domain/tool-servers';
import type { Queryable } from './pool';

/**
 * The tools of a turn (or a delegate), pinned: the first model call of the turn stores the list under its content hash
 * and every later step reads it back, whatever the servers list by then.
 */
export async function pinnedTools(
  db: Queryable,
  transcriptKey: string,
  turnId: string,
): Promise<{ hash: string; tools: PinnedTool[] } | undefined> {
  const { rows } = await db.query<{ hash: string; tools: PinnedTool[] }>(
    `SELECT p.hash, l.tools FROM turn_tool_lists p JOIN tool_lists l USING (hash)
      WHERE p.transcript_key = $1 AND p.turn_id = $2`,
    [transcriptKey, turnId],
  );
  return rows[0];
}

/** Pins `tools` to the turn unless a list is pinned already; answers the list the turn has. */
export async function pinTools(
  db: Queryable,
  p: { transcriptKey: string; turnId: string; hash: string; tools: PinnedTool[] },
): Promise<{ hash: string; tools: PinnedTool[] }> {
  await db.query(`INSERT INTO tool_lists (hash, tools) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING`, [
    p.hash,
    JSON.stringify(p.tools),
  ]);
  await db.query(
    `INSERT INTO turn_tool_lists (transcript_key, turn_id, hash) VALUES ($1, $2, $3)
     ON CONFLICT (transcript_key, turn_id) DO NOTHING`,
    [p.transcriptKey, p.turnId, p.hash],
  );
  return (await pinnedTools(db, p.transcriptKey, p.turnId))!;
}
