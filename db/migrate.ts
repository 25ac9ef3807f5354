import path from 'node:path';
import { runner } from 'node-pg-migrate';

export const MIGRATIONS_DIR = path.join(__dirname, 'migrations');

/** Applies pending migrations; concurrent callers (worker and API starting together) wait on the lock. */
export async function migrate(databaseUrl: string, log: (msg: string) => void = () => undefined): Promise<void> {
  await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: 'up',
    migrationsTable: 'keel_migrations',
    checkOrder: true,
    advisoryLockMode: 'wait',
    log,
  });
}
