import type pg from 'pg';

/** Creates each database the server lacks (Keel's; Temporal's two for npm run cluster), as a user who may. */
export async function createDatabasesIfMissing(admin: pg.Client, names: readonly string[]): Promise<void> {
  for (const name of names) {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
  }
}
