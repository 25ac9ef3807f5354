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
  return pool;
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
