/** An agent's apps as a person defines them, and the records of their tables as the API writes and reads them. */
import { randomUUID } from 'node:crypto';
import { getApp, listRecords, upsertRecord, type AppRecord, type AppRow } from '../db/apps';
import type { Pool } from '../db/pool';
import { unknownFields } from '../domain/apps';
import { containsNul } from '../domain/text';

// A write db/apps.ts makes whole in one transaction (the agent comes into being with its first app), and the rows the
// API shows.
export { putApp, type AppRecord, type AppRow } from '../db/apps';

export type AppRefusal = {
  code: 'not_found' | 'unknown_columns' | 'invalid_request';
  message: string;
  status: 400 | 404;
  /** unknown_columns: the table's columns. */
  details?: { columns: string[] };
};
export type AppResult<T> = { ok: true; value: T } | { ok: false; error: AppRefusal };

const refuse = (
  code: AppRefusal['code'],
  message: string,
  status: AppRefusal['status'],
  details?: AppRefusal['details'],
): AppResult<never> => ({ ok: false, error: { code, message, status, ...(details ? { details } : {}) } });

type Table = AppRow['tables'][number];

/** The table of the app, or a 404 naming what is missing. */
async function tableOf(pool: Pool, agentId: string, appId: string, table: string): Promise<AppResult<Table>> {
  const found = await getApp(pool, agentId, appId);
  if (!found) return refuse('not_found', `app ${appId} not found`, 404);
  const t = found.tables.find((x) => x.name === table);
  if (!t) return refuse('not_found', `table ${table} of app ${appId} not found`, 404);
  return { ok: true, value: t };
}

/**
 * Upserts a record by id (a new id when none is given): only the table's columns, and no NUL character anywhere
 * (PostgreSQL's jsonb cannot hold it).
 */
export async function upsertAppRecord(
  pool: Pool,
  agentId: string,
  appId: string,
  table: string,
  fields: { id?: string } & Record<string, unknown>,
): Promise<AppResult<{ record: AppRecord; created: boolean }>> {
  const t = await tableOf(pool, agentId, appId, table);
  if (!t.ok) return t;
  const { columns } = t.value;
  const unknown = unknownFields(fields, columns);
  if (unknown.length)
    return refuse('unknown_columns', `table ${table} has no column(s): ${unknown.join(', ')}`, 400, { columns });
  if (containsNul(fields)) return refuse('invalid_request', 'record values must not contain the NUL character', 400);
  return { ok: true, value: await upsertRecord(pool, agentId, appId, table, fields.id ?? randomUUID(), fields) };
}

/** A table's records; a 404 naming what is missing when there is no such app or table. */
export async function listAppRecords(
  pool: Pool,
  agentId: string,
  appId: string,
  table: string,
): Promise<AppResult<AppRecord[]>> {
  const t = await tableOf(pool, agentId, appId, table);
  if (!t.ok) return t;
  return { ok: true, value: await listRecords(pool, agentId, appId, table) };
}
