import type { ListedTool, ToolPolicy } from '../domain/tool-servers';
import { ensureAgent } from './agents';
import type { Queryable } from './pool';

/** Names of a server's secrets, each with its fingerprint (services/secrets.ts); never the values. */
export interface SecretFingerprints {
  headers: Record<string, string>;
  env: Record<string, string>;
}

export interface ToolServerRow {
  agentId: string;
  name: string;
  transport: 'http' | 'stdio';
  url: string | null;
  command: string | null;
  args: string[];
  /** Header values and environment, sealed; opened only where the server is reached. */
  sealedSecrets: string | null;
  fingerprints: SecretFingerprints;
  policies: Record<string, ToolPolicy>;
  defaultPolicy: ToolPolicy | null;
  enabled: boolean;
  tools: ListedTool[];
  toolsListedAt: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

export interface ToolServerRecord {
  agent_id: string;
  name: string;
  transport: 'http' | 'stdio';
  url: string | null;
  command: string | null;
  args: string[];
  sealed_secrets: string | null;
  secret_fingerprints: SecretFingerprints;
  policies: Record<string, ToolPolicy>;
  default_policy: ToolPolicy | null;
  enabled: boolean;
  tools: ListedTool[];
  tools_listed_at: Date;
  version: number;
  created_at: Date;
  updated_at: Date;
}

export const toToolServer = (r: ToolServerRecord): ToolServerRow => ({
  agentId: r.agent_id,
  name: r.name,
  transport: r.transport,
  url: r.url,
  command: r.command,
  args: r.args,
  sealedSecrets: r.sealed_secrets,
  fingerprints: r.secret_fingerprints,
  policies: r.policies,
  defaultPolicy: r.default_policy,
  enabled: r.enabled,
  tools: r.tools,
  toolsListedAt: r.tools_listed_at.toISOString(),
  version: r.version,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

export type NewToolServer = Omit<ToolServerRow, 'toolsListedAt' | 'version' | 'createdAt' | 'updatedAt'>;

/** Creates or replaces a server; a replacement is a new version, so live sessions of the old one are not reused. */
export async function putToolServer(
  db: Queryable,
  s: NewToolServer,
): Promise<{ row: ToolServerRow; created: boolean }> {
  await ensureAgent(db, s.agentId);
  const { rows } = await db.query<ToolServerRecord & { created: boolean }>(
    `INSERT INTO tool_servers AS t (agent_id, name, transport, url, command, args, sealed_secrets, secret_fingerprints,
       policies, default_policy, enabled, tools)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ON CONFLICT (agent_id, name) DO UPDATE SET
       transport = EXCLUDED.transport, url = EXCLUDED.url, command = EXCLUDED.command, args = EXCLUDED.args,
       sealed_secrets = EXCLUDED.sealed_secrets, secret_fingerprints = EXCLUDED.secret_fingerprints,
       policies = EXCLUDED.policies, default_policy = EXCLUDED.default_policy, enabled = EXCLUDED.enabled,
       tools = EXCLUDED.tools, tools_listed_at = now(), version = t.version + 1, updated_at = now()
     RETURNING *, (xmax = 0) AS created`,
    [
      s.agentId,
      s.name,
      s.transport,
      s.url,
      s.command,
      JSON.stringify(s.args),
      s.sealedSecrets,
      JSON.stringify(s.fingerprints),
      JSON.stringify(s.policies),
      s.defaultPolicy,
      s.enabled,
      JSON.stringify(s.tools),
    ],
  );
  return { row: toToolServer(rows[0]!), created: rows[0]!.created };
}

export async function getToolServer(db: Queryable, agentId: string, name: string): Promise<ToolServerRow | undefined> {
  const { rows } = await db.query<ToolServerRecord>(`SELECT * FROM tool_servers WHERE agent_id = $1 AND name = $2`, [
    agentId,
    name,
  ]);
  return rows[0] && toToolServer(rows[0]);
}

/** The agent's servers by name (an agent has few). */
export async function listToolServers(db: Queryable, agentId: string): Promise<ToolServerRow[]> {
  const { rows } = await db.query<ToolServerRecord>(`SELECT * FROM tool_servers WHERE agent_id = $1 ORDER BY name`, [
    agentId,
  ]);
  return rows.map(toToolServer);
}

export async function deleteToolServer(db: Queryable, agentId: string, name: string): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM tool_servers WHERE agent_id = $1 AND name = $2`, [agentId, name]);
  return (rowCount ?? 0) > 0;
}

/** A fresh listing of the server's tools, unless the server was replaced meanwhile (another version). */
export async function setToolServerTools(
  db: Queryable,
  s: { agentId: string; name: string; version: number; tools: ListedTool[] },
): Promise<ToolServerRow | undefined> {
  const { rows } = await db.query<ToolServerRecord>(
    `UPDATE tool_servers SET tools = $4, tools_listed_at = now(), updated_at = now()
      WHERE agent_id = $1 AND name = $2 AND version = $3 RETURNING *`,
    [s.agentId, s.name, s.version, JSON.stringify(s.tools)],
  );
  return rows[0] && toToolServer(rows[0]);
}

/** A person's change of policies or of whether the server is enabled; how it is reached stays as it is. */
export async function updateToolServerPolicies(
  db: Queryable,
  s: {
    agentId: string;
    name: string;
    policies?: Record<string, ToolPolicy>;
    defaultPolicy?: ToolPolicy | null;
    enabled?: boolean;
  },
): Promise<ToolServerRow | undefined> {
  const { rows } = await db.query<ToolServerRecord>(
    `UPDATE tool_servers SET
       policies = CASE WHEN $3::jsonb IS NULL THEN policies ELSE policies || $3::jsonb END,
       default_policy = CASE WHEN $4 THEN $5 ELSE default_policy END,
       enabled = coalesce($6, enabled), updated_at = now()
     WHERE agent_id = $1 AND name = $2 RETURNING *`,
    [
      s.agentId,
      s.name,
      s.policies ? JSON.stringify(s.policies) : null,
      s.defaultPolicy !== undefined,
      s.defaultPolicy ?? null,
      s.enabled ?? null,
    ],
  );
  return rows[0] && toToolServer(rows[0]);
}
