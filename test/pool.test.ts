import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPool, inTransaction, type Pool } from '../db/pool';

let pool: Pool;
let admin: Pool;
beforeAll(() => {
  pool = createPool(inject('databaseUrl'));
  admin = createPool(inject('databaseUrl'));
});
afterAll(async () => {
  await pool?.end();
  await admin?.end();
});

describe('the connection pool (real PostgreSQL)', () => {
  // The soak found this: PostgreSQL restarting under a transaction ended the worker with an unhandled 'error' event.
  it('a connection dropped mid-transaction fails that transaction, not the process; the pool goes on', async () => {
    const failure = await inTransaction(pool, async (client) => {
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      // Give the socket's close time to arrive, as it would mid-query.
      await client.query('SELECT pg_sleep(0.2)');
    }).then(
      () => undefined,
      (err: unknown) => err,
    );
    // Which words pg uses depends on whether the socket's close arrives before or during the next query: the backend
    // was terminated, or the client already knows its connection failed. Either way the transaction failed.
    expect(String(failure)).toMatch(/terminat|connection error/i);
    // The broken client was destroyed, not handed out again.
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1);
    expect(
      await inTransaction(pool, async (c) => (await c.query<{ two: number }>('SELECT 2 AS two')).rows[0]?.two),
    ).toBe(2);
  });
});
