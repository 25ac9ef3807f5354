import type { AppDefinition } from '../domain/apps';
import { ensureAgent } from './agents';
import { inTransaction, type Pool, type Queryable } from './pool';

export interface AppRow extends AppDefinition {
  appId: string;
  updatedAt: string;
}

export async function putApp(pool: Pool, agentId: string, appId: string, app: AppDefinition): Promise<AppRow> {
  return inTransaction(pool, async (db) => {
    await ensureAgent(db, agentId);
    const { rows } = await db.query<{
      app_id: string;
      name: string;
      tables: AppDefinition['tables'];
      updated_at: Date;
    }>(
      `INSERT INTO apps (agent_id, app_id, name, tables) VALUES ($1, $2, $3, $4)
       ON CONFLICT (agent_id, app_id) DO UPDATE SET name = EXCLUDED.name, tables = EXCLUDED.tables, updated_at = now()
       RETURNING app_id, name, tables, updated_at`,
      [agentId, appId, app.name, JSON.stringify(app.tables)],
    );
    const r = rows[0]!;
    return { appId: r.app_id, name: r.name, tables: r.tables, updatedAt: r.updated_at.toISOString() };
  });
}

export async function getApp(db: Queryable, agentId: string, appId: string): Promise<AppRow | undefined> {
  const { rows } = await db.query<{ app_id: string; name: string; tables: AppDefinition['tables']; updated_at: Date }>(
    'SELECT app_id, name, tables, updated_at FROM apps WHERE agent_id = $1 AND app_id = $2',
    [agentId, appId],
  );
  const r = rows[0];
  return r ? { appId: r.app_id, name: r.name, tables: r.tables, updatedAt: r.updated_at.toISOString() } : undefined;
}

export interface AppRecord {
  id: string;
  [field: string]: unknown;
}

/** Upsert by id: a record with an existing id replaces its fields. */
export async function upsertRecord(
  db: Queryable,
  agentId: string,
  appId: string,
  table: string,
  id: string,
  data: Record<string, unknown>,
): Promise<{ record: AppRecord; created: boolean }> {
  const { rows } = await db.query<{ data: Record<string, unknown>; created: boolean }>(
    `INSERT INTO app_records (agent_id, app_id, table_name, record_id, data) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (agent_id, app_id, table_name, record_id) DO UPDATE SET data = EXCLUDED.data, updated_at = now()
     RETURNING data, (xmax = 0) AS created`,
    [agentId, appId, table, id, JSON.stringify({ ...data, id })],
  );
  return { record: rows[0]!.data as AppRecord, created: rows[0]!.created };
}

export async function listRecords(
  db: Queryable,
  agentId: string,
  appId: string,
  table: string,
  limit = 1000,
): Promise<AppRecord[]> {
  const { rows } = await db.query<{ data: AppRecord }>(
    `SELECT data FROM app_records WHERE agent_id = $1 AND app_id = $2 AND table_name = $3
      ORDER BY created_at, record_id LIMIT $4`,
    [agentId, appId, table, limit],
  );
  return rows.map((r) => r.data);
}

export async function getRecord(
  db: Queryable,
  agentId: string,
  appId: string,
  table: string,
  id: string,
): Promise<AppRecord | undefined> {
  const { rows } = await db.query<{ data: AppRecord }>(
    'SELECT data FROM app_records WHERE agent_id = $1 AND app_id = $2 AND table_name = $3 AND record_id = $4',
    [agentId, appId, table, id],
  );
  return rows[0]?.data;
}
