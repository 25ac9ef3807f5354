import path from 'node:path';
import { migrate } from '../db/migrate';
import { isLoopbackHost, loadConfig } from '../domain/config';
import { describeEgress, parseEgressAllow, withLoopback } from '../domain/egress';
import { ensureConsoleBuilt } from './console-build';
import { startDevServer, waitForTemporal, type DevServer } from './dev-server';
import { describeTemporalCli } from './temporal-cli';
import { startPostgresProcess, type PostgresProcess } from './postgres-process';
import { freePort } from './ports';
import { REPO_ROOT, spawnTs, spawnWorker, stopProcess } from './processes';
import { waitForReady } from './ready';
import { devKey } from './dev-keys';
import { Supervisor } from './supervisor';

/**
 * `npm start`: everything a newcomer needs, in one command. A Temporal dev server (unless one already answers at
 * TEMPORAL_ADDRESS), PostgreSQL (DATABASE_URL, or an embedded one under the data folder), migrations, the console's
 * build when its sources changed, then the worker and the API as child processes. Ctrl-C stops them all, in reverse
 * order.
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const dataDir = path.resolve(config.dataDir);
  const supervisor = new Supervisor();

  try {
    const address = config.temporal.address;
    const port = Number(address.split(':').pop() ?? 7233);
    let temporal: DevServer | undefined;
    let uiUrl = `http://127.0.0.1:${port + 1000}`;
    if (
      await waitForTemporal(address, 1_000, config.temporal.namespace).then(
        () => true,
        () => false,
      )
    ) {
      console.log(`keel: using the Temporal server already at ${address}`);
      uiUrl = config.temporalUiUrl ?? `(the UI of your Temporal server at ${address})`;
    } else if (!isLoopbackHost(address.split(':')[0] ?? '')) {
      throw new Error(
        `Temporal at ${address} does not answer; ` +
          'npm start runs a dev server only on this machine (unset TEMPORAL_ADDRESS for that)',
      );
    } else {
      console.log('keel: starting the Temporal dev server…');
      temporal = await startDevServer({
        port,
        uiPort: port + 1000,
        // The UI decodes Keel's sealed payloads through the API's codec server (api/routes/codec.ts).
        codecEndpoint: `http://${config.api.host}:${config.api.port}/codec`,
        dbFile: path.join(dataDir, 'temporal.db'),
        namespace: config.temporal.namespace,
      });
      const server = temporal;
      supervisor.onStop(() => server.stop());
    }
    let databaseUrl = config.databaseUrl;
    let pg: PostgresProcess | undefined;
    const pgDataDir = path.join(dataDir, 'postgres');
    if (!databaseUrl) {
      console.log('keel: starting the embedded PostgreSQL…');
      pg = await startPostgresProcess({ dataDir: pgDataDir, port: config.embeddedPgPort });
      const db = pg;
      supervisor.onStop(() => db.stop());
      databaseUrl = pg.url;
    }
    await migrate(databaseUrl);
    // The API serves the console at /console/; a build is needed only after its sources changed.
    await ensureConsoleBuilt();

    // The worker serves the Temporal SDK's metrics on a free loopback port; the API appends them to its /metrics.
    const workerMetrics = config.workerMetricsAddress ?? `127.0.0.1:${await freePort()}`;
    // npm start is Keel on this machine, for trying it: its webhook receivers and fakes listen on loopback, so the
    // egress guard allows loopback here, explicitly and on the banner. `npm run worker` alone allows only the list.
    const egressAllow = withLoopback(process.env.KEEL_EGRESS_ALLOW);
    const secrets = config.secretsKey
      ? { key: config.secretsKey, where: 'KEEL_SECRETS_KEY' }
      : devKey(dataDir, 'secrets.key', 'KEEL_SECRETS_KEY', 'secrets at rest');
    const payloads = config.payloads.keys
      ? { key: config.payloads.keys, where: 'KEEL_PAYLOAD_KEYS' }
      : devKey(dataDir, 'payloads.key', 'KEEL_PAYLOAD_KEYS', "Temporal's payloads");
    const sealed = config.payloads.encryption !== 'off';
    const env = {
      ...process.env,
      KEEL_SECRETS_KEY: secrets.key,
      ...(sealed ? { KEEL_PAYLOAD_KEYS: payloads.key } : {}),
      KEEL_EGRESS_ALLOW: egressAllow,
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: address,
      KEEL_WORKER_METRICS_ADDRESS: workerMetrics,
      KEEL_WORKER_METRICS_URL: config.workerMetricsUrl ?? `http://${workerMetrics}/metrics`,
      // The console links runs to the dev server's UI (a UI of your own is KEEL_TEMPORAL_UI_URL's, already in env).
      ...(temporal && !config.temporalUiUrl ? { KEEL_TEMPORAL_UI_URL: uiUrl } : {}),
    };
    for (const [child, what] of [
      [spawnWorker(env), 'the worker'],
      [spawnTs('api/main.ts', env), 'the API'],
    ] as const) {
      supervisor.onStop(() => stopProcess(child));
      supervisor.watch(child, what);
    }

    const api = `http://${config.api.host}:${config.api.port}`;
    // The banner promises that the first request works: wait for the API and for the worker's pollers.
    await waitForReady(`${api}/healthz`, address, config.temporal.namespace, config.temporal.taskQueue, 120_000);
    console.log(
      [
        '',
        'Keel is running.',
        `  API          ${api}/v1`,
        `  OpenAPI      ${api}/docs`,
        `  Console      ${api}/console/`,
        `  Temporal UI  ${uiUrl}`,
        `  Temporal CLI ${temporal ? describeTemporalCli(temporal.cli) : `not used (Temporal at ${address} answered)`}`,
        `  PostgreSQL   ${pg ? describeEmbeddedPg(pg) : 'DATABASE_URL'}`,
        `  Egress       ${describeEgress(parseEgressAllow(egressAllow))} — loopback allowed by npm start`,
        `  Secrets      sealed with the key in ${secrets.where}`,
        `  Payloads     ${sealed ? `sealed with the key in ${payloads.where}` : 'clear (KEEL_PAYLOAD_ENCRYPTION=off)'}`,
        `  Codec        ${api}/codec (the Temporal UI and \`temporal --codec-endpoint\` decode through it)`,
        `  Model        ${config.model.provider}` +
          (config.model.provider === 'scripted'
            ? ' (offline; set ANTHROPIC_API_KEY to use Claude)'
            : ` (${config.model.anthropicModel})`),
        '',
        `Try: curl -X POST '${api}/v1/agents/a1/conversations/c1/messages?wait=30' ` +
          `-H 'content-type: application/json' -d '{"text":"hello"}'`,
        'Ctrl-C stops everything.',
        '',
      ].join('\n'),
    );
  } catch (err) {
    console.error('keel: start failed:', err instanceof Error ? err.message : err);
    await supervisor.shutdown(1);
  }
}

/**
 * Where the embedded PostgreSQL runs. As root it runs as the postgres user; what that user cannot enter (a checkout
 * in root's home folder) is copied or kept under the runtime folder instead, and the banner says so.
 */
function describeEmbeddedPg(pg: PostgresProcess): string {
  const notes: string[] = [];
  if (pg.movedFrom) notes.push(`instead of ${pg.movedFrom}, which the postgres user cannot enter`);
  if (!pg.binDir.startsWith(REPO_ROOT + path.sep)) notes.push(`binaries in ${pg.binDir}`);
  return `embedded, ${pg.dataDir}${notes.length ? ` (${notes.join('; ')})` : ''}`;
}

void main();
