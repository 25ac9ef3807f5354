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

/**
 * Pins `tools` to the turn unless a list is pinned already; answers the list the turn has. One statement when the pin
 * is new (the list and the pin together), a second to read the pin an earlier attempt made.
 */
export async function pinTools(
  db: Queryable,
  p: { transcriptKey: string; turnId: string; hash: string; tools: PinnedTool[] },
): Promise<{ hash: string; tools: PinnedTool[] }> {
  const { rowCount } = await db.query(
    `WITH list AS (INSERT INTO tool_lists (hash, tools) VALUES ($3, $4) ON CONFLICT (hash) DO NOTHING)
     INSERT INTO turn_tool_lists (transcript_key, turn_id, hash) VALUES ($1, $2, $3)
     ON CONFLICT (transcript_key, turn_id) DO NOTHING`,
    [p.transcriptKey, p.turnId, p.hash, JSON.stringify(p.tools)],
  );
  if (rowCount === 1) return { hash: p.hash, tools: p.tools };
  return (await pinnedTools(db, p.transcriptKey, p.turnId))!;
}
