import type { Pool, Queryable } from './pool';

/**
 * Every column that keeps a webhook Delivery, alone or inside a larger value: where a secret stored before sealing
 * may still be in clear.
 */
const DELIVERY_COLUMNS = [
  ['agents', 'owner_delivery'],
  ['agents', 'destinations'],
  ['conversations', 'default_delivery'],
  ['inbound_messages', 'delivery'],
  ['turns', 'delivery'],
  ['deliveries', 'target'],
  ['effects', 'request'],
  ['jobs', 'delivery'],
  ['routines', 'delivery'],
  ['routine_runs', 'gate'],
  ['routine_calls', 'result'],
] as const;

/** A `"secret": "…"` in a value's text that is not sealed (a sealed one begins `keel-sealed:`). */
const CLEAR_SECRET_TEXT = '"secret": "(?!keel-sealed:)';

/** A stored value that holds a secret in clear, as one of the columns keeps it. */
export interface StoredClearSecret {
  table: string;
  column: string;
  value: unknown;
}

export async function valuesWithClearSecrets(db: Queryable): Promise<StoredClearSecret[]> {
  const found: StoredClearSecret[] = [];
  for (const [table, column] of DELIVERY_COLUMNS) {
    const { rows } = await db.query<{ value: unknown }>(
      `SELECT DISTINCT ${column} AS value FROM ${table} WHERE ${column}::text ~ $1`,
      [CLEAR_SECRET_TEXT],
    );
    found.push(...rows.map((r) => ({ table, column, value: r.value })));
  }
  return found;
}

/** Every copy of a stored value replaced by another (compared as jsonb, so any copy of it matches). */
export async function replaceStoredValue(db: Queryable, at: StoredClearSecret, next: unknown): Promise<void> {
  await db.query(`UPDATE ${at.table} SET ${at.column} = $2::jsonb WHERE ${at.column} = $1::jsonb`, [
    JSON.stringify(at.value),
    JSON.stringify(next),
  ]);
}

export async function passFinished(db: Pool, name: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM maintenance_passes WHERE name = $1', [name]);
  return rowCount !== 0;
}

export async function recordPassFinished(db: Queryable, name: string): Promise<void> {
  await db.query('INSERT INTO maintenance_passes (name) VALUES ($1) ON CONFLICT DO NOTHING', [name]);
}
