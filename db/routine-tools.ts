/** The tools routine runs authored for an app (`routine_tools`): every version of each, by name. */
import type { AuthoredTool } from '../domain/routines';
import type { Queryable } from './pool';

export interface SavedToolRow extends AuthoredTool {
  version: number;
  authoredBy: string;
  authoredInRun: string | null;
  createdAt: string;
}

interface ToolDbRow {
  name: string;
  version: number;
  title: string;
  purpose: string;
  inputs: string[];
  code: string;
  authored_by: string;
  authored_in_run: string | null;
  created_at: Date;
}

const toolOf = (r: ToolDbRow): SavedToolRow => ({
  name: r.name,
  version: r.version,
  title: r.title,
  purpose: r.purpose,
  inputs: r.inputs,
  code: r.code,
  authoredBy: r.authored_by,
  authoredInRun: r.authored_in_run,
  createdAt: r.created_at.toISOString(),
});

/** The latest version of each tool of an app, oldest tool first (the order tool selection breaks ties by). */
export async function listTools(db: Queryable, agentId: string, appId: string): Promise<SavedToolRow[]> {
  const { rows } = await db.query<ToolDbRow>(
    `SELECT t.* FROM routine_tools t
     JOIN (SELECT name, max(version) AS version, min(created_at) AS first FROM routine_tools
            WHERE agent_id = $1 AND app_id = $2 GROUP BY name) latest
       ON latest.name = t.name AND latest.version = t.version
     WHERE t.agent_id = $1 AND t.app_id = $2 ORDER BY latest.first, t.name`,
    [agentId, appId],
  );
  return rows.map(toolOf);
}

export async function getTool(
  db: Queryable,
  agentId: string,
  appId: string,
  name: string,
  version: number,
): Promise<SavedToolRow | undefined> {
  const { rows } = await db.query<ToolDbRow>(
    'SELECT * FROM routine_tools WHERE agent_id = $1 AND app_id = $2 AND name = $3 AND version = $4',
    [agentId, appId, name, version],
  );
  return rows[0] && toolOf(rows[0]);
}

/**
 * Saves an authored tool as the next version of its name (earlier versions stay). Idempotent per run: a retried
 * save returns the version the run already saved.
 */
export async function saveTool(
  db: Queryable,
  agentId: string,
  appId: string,
  tool: AuthoredTool,
  authoredBy: string,
  runId: string,
): Promise<SavedToolRow> {
  const saved = await db.query<ToolDbRow>('SELECT * FROM routine_tools WHERE authored_in_run = $1', [runId]);
  if (saved.rows[0]) return toolOf(saved.rows[0]);
  // Serialise versions of one app's tools on the app row.
  await db.query('SELECT 1 FROM apps WHERE agent_id = $1 AND app_id = $2 FOR UPDATE', [agentId, appId]);
  const { rows } = await db.query<ToolDbRow>(
    `INSERT INTO routine_tools (agent_id, app_id, name, version, title, purpose, inputs, code, authored_by,
                               authored_in_run)
     SELECT $1, $2, $3, coalesce(max(version), 0) + 1, $4, $5, $6, $7, $8, $9
       FROM routine_tools WHERE agent_id = $1 AND app_id = $2 AND name = $3
     RETURNING *`,
    [agentId, appId, tool.name, tool.title, tool.purpose, JSON.stringify(tool.inputs), tool.code, authoredBy, runId],
  );
  return toolOf(rows[0]!);
}
