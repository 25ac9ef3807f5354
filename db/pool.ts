import { createHash } from 'node:crypto';
import pg from 'pg';

export type Pool = pg.Pool;
export type Queryable = pg.Pool | pg.PoolClient;

/**
 * One pool per process. An idle client's error (PostgreSQL restarted under us) must not crash the process:
 * the next query reconnects, and the activity that needed it is retried by Temporal.
 */
export function createPool(databaseUrl: string, max = 10): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  });
  pool.on('error', () => {
    /* the client is discarded by pg; nothing else to do */
  });
  pool.on('connect', prepareStatements);
  return pool;
}

/**
 * Each statement with parameters goes to PostgreSQL as a prepared statement named by its text, so a connection parses
 * and plans it once instead of on every call: over a burst of turns, parsing, planning and catalog lookups took about
 * half of PostgreSQL's CPU (bench/CHANGES-TRIED.md). Keel's statement texts are a bounded set (their parameters are
 * never spliced into the text), so the names a connection keeps are bounded too.
 */
function prepareStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  const prepared = (config: unknown, values: unknown): unknown => {
    if (typeof config === 'string')
      return Array.isArray(values) ? { text: config, name: statementName(config) } : config;
    // A named statement stays as named; a Submittable (a cursor, a stream) is its own query.
    if (typeof config !== 'object' || config === null || !('text' in config) || 'name' in config) return config;
    if ('submit' in config) return config;
    const { text } = config as pg.QueryConfig;
    const hasValues = Array.isArray(values) || Array.isArray((config as pg.QueryConfig).values);
    return hasValues ? { ...config, name: statementName(text) } : config;
  };
  (client as { query: unknown }).query = (config: unknown, values?: unknown, ...rest: unknown[]) =>
    query(prepared(config, values), values, ...rest);
}

const names = new Map<string, string>();

/** A statement's name: a digest of its text (PostgreSQL keeps names to 63 bytes). */
function statementName(text: string): string {
  let name = names.get(text);
  if (!name) {
    name = `keel_${createHash('sha256').update(text).digest('base64url').slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

/** Runs `fn` in one transaction; rolled back on any error. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A checked-out client has no 'error' listener of the pool's: a connection dropped mid-transaction (PostgreSQL
  // restarted) would be an unhandled 'error' event and end the process. The query fails anyway; that is enough.
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken = err;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.removeListener('error', onError);
    // A broken client is destroyed, not returned to the pool.
    client.release(broken);
  }
}
