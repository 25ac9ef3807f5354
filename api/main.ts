import { Client, Connection } from '@temporalio/client';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { assertSafeBind, loadConfig } from '../domain/config';
import { jobSettings } from '../services/job-settings';
import { ensureSearchAttributes, MissingSearchAttributesError } from '../services/temporal-namespace';
import { tracingFromConfig } from '../worker/tracing';
import { buildApi } from './server';
import { payloadEncryption } from '../services/payload-encryption';
import { sealStoredSecrets } from '../services/delivery-secrets';
import { secretBoxOf } from '../services/secrets';
import { logOutput } from '../services/log-output';
import { temporalConnectionOptions } from '../services/temporal-connection';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  if (!config.databaseUrl)
    throw new Error('DATABASE_URL is not set: run `npm start`, or point DATABASE_URL at PostgreSQL');
  assertSafeBind(config.api.host, config.api.tokens);
  // Before anything starts: production without payload keys refuses here, saying why.
  const payloads = payloadEncryption(config.payloads, 'API');
  await migrate(config.databaseUrl);
  const pool = createPool(config.databaseUrl);
  // Once: webhook secrets a Keel before sealing stored in clear are sealed now.
  const stored = await sealStoredSecrets(pool, secretBoxOf(config.secretsKey));
  if (stored.sealed) console.log(`keel api: sealed the webhook secrets of ${stored.sealed} stored values`);
  if (stored.waiting)
    console.warn(`keel api: ${stored.waiting} stored values keep webhook secrets clear until KEEL_SECRETS_KEY is set`);
  const connection = await Connection.connect(temporalConnectionOptions(config.temporal));
  // Without Keel's search attributes Temporal refuses the workflows and Schedules the API starts: add them, or stop.
  const { namespace } = config.temporal;
  const added = await ensureSearchAttributes(connection, namespace);
  if (added.length) {
    console.log(`keel api: registered the search attributes ${added.join(', ')} in namespace ${namespace}`);
  }
  const tracing = tracingFromConfig(config, 'keel-api');
  const temporal = new Client({
    connection,
    namespace: config.temporal.namespace,
    dataConverter: payloads.dataConverter,
    plugins: tracing ? [tracing.plugin] : [],
  });
  const app = await buildApi({
    pool,
    temporal,
    taskQueue: config.temporal.taskQueue,
    conversationIdleMs: config.conversationIdleMs,
    tokens: config.api.tokens,
    logger: { level: config.logLevel, stream: logOutput() },
    jobs: jobSettings(config),
    routines: config.routines,
    workerMetricsUrl: config.workerMetricsUrl,
    temporalUiUrl: config.temporalUiUrl,
    egressAllow: config.egress.allow,
    ...(config.secretsKey ? { secretsKey: config.secretsKey } : {}),
    toolCommands: config.tools.commands,
  });
  await app.listen({ host: config.api.host, port: config.api.port });

  const stop = async () => {
    await app.close();
    await connection.close();
    await pool.end();
    await tracing?.shutdown();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

main().catch((err: unknown) => {
  // A refusal Keel explains (e.g. the missing search attributes) is printed as its message alone.
  console.error('keel api failed:', err instanceof MissingSearchAttributesError ? err.message : err);
  process.exit(1);
});
