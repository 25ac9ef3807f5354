import path from 'node:path';
import { runner } from 'node-pg-migrate';
import pg from 'pg';

export const MIGRATIONS_DIR = path.join(__dirname, 'migrations');

/** PostgreSQL going away or not yet taking connections: waited out at start, never a reason to exit. */
const UNAVAILABLE = new Set(['ECONNREFUSED', 'ECONNRESET', '57P01', '57P02', '57P03', 'ENOTFOUND']);
const isUnavailable = (err: unknown) =>
  typeof err === 'object' && err !== null && UNAVAILABLE.has(String((err as { code?: unknown }).code));

/**
 * Applies pending migrations; concurrent callers (worker and API starting together) wait on the lock. A PostgreSQL
 * that restarts while a process starts is waited out for `waitMs` (a soak met it: a worker started as PostgreSQL went
 * down, and node-pg-migrate's own client ended the process on an unhandled 'error' event).
 */
export async function migrate(
  databaseUrl: string,
  log: (msg: string) => void = () => undefined,
  waitMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      return await migrateOnce(databaseUrl, log);
    } catch (err) {
      if (!isUnavailable(err) || Date.now() + delay > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** One attempt, on a client of ours with an 'error' listener: a dropped connection fails it instead of the process. */
async function migrateOnce(databaseUrl: string, log: (msg: string) => void): Promise<void> {
  const dbClient = new pg.Client({ connectionString: databaseUrl });
  let broken: Error | undefined;
  dbClient.on('error', (err) => (broken = err));
  try {
    await dbClient.connect();
    await runner({
      dbClient,
      dir: MIGRATIONS_DIR,
      direction: 'up',
      migrationsTable: 'keel_migrations',
      checkOrder: true,
      advisoryLockMode: 'wait',
      log,
    });
  } catch (err) {
    throw broken ?? err;
  } finally {
    await dbClient.end().catch(() => undefined);
  }
}
