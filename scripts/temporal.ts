import path from 'node:path';
import { loadConfig } from '../domain/config';
import { startDevServer } from './dev-server';
import { describeTemporalCli } from './temporal-cli';

/** `npm run temporal`: the Temporal dev server alone, history in a SQLite file under the data folder, UI on :8233. */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const port = Number(config.temporal.address.split(':').pop() ?? 7233);
  const server = await startDevServer({
    port,
    uiPort: port + 1000,
    dbFile: path.resolve(config.dataDir, 'temporal.db'),
    namespace: config.temporal.namespace,
  });
  console.log(`Temporal dev server on ${server.address}, UI on http://127.0.0.1:${port + 1000}`);
  console.log(`Temporal CLI ${describeTemporalCli(server.cli)}`);
  const stop = () => void server.stop().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  server.process.once('exit', (code) => process.exit(code ?? 1));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
