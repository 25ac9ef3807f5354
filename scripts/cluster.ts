import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../domain/config';
import { describeEgress, parseEgressAllow, withLoopback } from '../domain/egress';
import { startClusterStack } from './cluster-stack';
import { Supervisor } from './supervisor';
import { defaultTemporalServerPorts, TEMPORAL_SERVER_VERSION } from './temporal-server';

/**
 * `npm run cluster [-- --workers N --apis M]`: Keel as it runs in production, on this machine. A Temporal server
 * (built once with Go) on PostgreSQL, N workers, M APIs (the first on KEEL_API_PORT, the next on the following
 * ports) and the Web UI. PostgreSQL is DATABASE_URL's server or an embedded one; Temporal's databases sit beside
 * Keel's. Ctrl-C stops everything.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      workers: { type: 'string', default: '2' },
      apis: { type: 'string', default: '2' },
      // The workers' build (KEEL_BUILD_ID): versioned workers, the first build current (docs/deploy.md).
      'build-id': { type: 'string' },
    },
  });
  const count = (name: string, v: string | undefined) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1 || n > 16) throw new Error(`--${name} must be a whole number from 1 to 16`);
    return n;
  };
  const workers = count('workers', values.workers);
  const apis = count('apis', values.apis);
  const config = loadConfig({ ...process.env, ...(values['build-id'] ? { KEEL_BUILD_ID: values['build-id'] } : {}) });
  const supervisor = new Supervisor();
  try {
    const temporalPort = Number(config.temporal.address.split(':').pop() ?? 7233);
    const dataDir = path.join(path.resolve(config.dataDir), 'cluster');
    // Its secrets and histories outlive a restart: the stack keeps their keys in the data folder, as npm start does.
    const cluster = await startClusterStack({
      workers,
      apis,
      dataDir,
      temporal: defaultTemporalServerPorts(temporalPort),
      apiPort: config.api.port,
      uiPort: temporalPort + 1000,
      ...(config.databaseUrl ? { databaseUrl: config.databaseUrl } : {}),
      pgPort: config.embeddedPgPort,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      ...(config.deployment ? { deployment: config.deployment } : {}),
    });
    supervisor.onStop(() => cluster.stop());
    cluster.workers().forEach((w, i) => supervisor.watch(w, `worker ${i + 1}`));
    cluster.apiProcesses().forEach((a, i) => supervisor.watch(a, `API ${i + 1}`));
    if ('process' in cluster.ui) supervisor.watch(cluster.ui.process, 'the Web UI');
    const pg = cluster.postgres();
    const payloads = cluster.keys.payloads;
    const ui = 'url' in cluster.ui ? cluster.ui.url : `not running: ${cluster.ui.unavailable}`;
    console.log(
      [
        '',
        `Keel is running as a cluster: Temporal server v${TEMPORAL_SERVER_VERSION} on PostgreSQL, ` +
          `${workers} worker${workers > 1 ? 's' : ''}, ${apis} API${apis > 1 ? 's' : ''}.`,
        ...cluster.apis.map((api, i) => `  API ${i + 1}        ${api}/v1   (OpenAPI ${api}/docs)`),
        `  Temporal     ${cluster.temporalAddress} (namespace ${cluster.namespace})`,
        `  Temporal UI  ${ui}`,
        `  Secrets      sealed with the key in ${cluster.keys.secrets}`,
        `  Payloads     ${payloads ? `sealed with the key in ${payloads}` : 'clear (encryption off)'}; ` +
          `the UI decodes through ${cluster.apis[0]}/codec`,
        `  PostgreSQL   ${pg ? `embedded, ${pg.dataDir}` : 'DATABASE_URL'} ` +
          '(Keel: keel; Temporal: temporal, temporal_visibility)',
        `  Workers      ${cluster
          .workers()
          .map((w) => `pid ${w.pid}`)
          .join(', ')}` +
          (config.deployment
            ? ` (deployment ${config.deployment.name}, build ${config.deployment.buildId})`
            : ' (unversioned)'),
        `  Egress       ${describeEgress(parseEgressAllow(withLoopback(process.env.KEEL_EGRESS_ALLOW)))} ` +
          '— loopback allowed, as npm start does',
        '',
        `Try: curl -X POST '${cluster.apis.at(-1)}/v1/agents/a1/conversations/c1/messages?wait=30' ` +
          `-H 'content-type: application/json' -d '{"text":"hello"}'`,
        'Ctrl-C stops everything.',
        '',
      ].join('\n'),
    );
  } catch (err) {
    console.error('keel: cluster failed:', err instanceof Error ? err.message : err);
    await supervisor.shutdown(1);
  }
}

void main();
