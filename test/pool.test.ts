import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPool, inTransaction, type Pool } from '../db/pool';

let pool: Pool;
let admin: Pool;
let single: Pool;
beforeAll(() => {
  pool = createPool(inject('databaseUrl'));
  admin = createPool(inject('databaseUrl'));
  single = createPool(inject('databaseUrl'), 1);
});
afterAll(async () => {
  await pool?.end();
  await admin?.end();
  await single?.end();
});

/** The statements the single connection has prepared. */
const prepared = async () =>
  (await single.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements ORDER BY 1')).rows.map(
    (r) => r.statement,
  );

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

  it('prepares a statement with parameters once per connection, by its text; one without stays plain', async () => {
    expect(await prepared()).toEqual([]);
    for (let i = 0; i < 3; i++) {
      expect((await single.query('SELECT $1::int + 1 AS n', [i])).rows).toEqual([{ n: i + 1 }]);
    }
    await inTransaction(single, async (db) => {
      await db.query({ text: 'SELECT $1::text AS t', values: ['in a transaction'] });
      await db.query('SELECT now()');
    });
    expect(await prepared()).toEqual(['SELECT $1::int + 1 AS n', 'SELECT $1::text AS t']);
  });
});
