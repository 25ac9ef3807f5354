import type { ChildProcess, StdioOptions } from 'node:child_process';
import { openSync } from 'node:fs';
import path from 'node:path';
import { migrate } from '../db/migrate';
import { loadConfig, type WorkerDeployment } from '../domain/config';
import { withLoopback } from '../domain/egress';
import type { DataConverter } from '@temporalio/common';
import { payloadEncryptionOfEnv } from '../services/payload-encryption';
import { devKey } from './dev-keys';
import { ensureGoTool } from './go-tools';
import { freePort, freePortBlock, portOpen } from './ports';
import { startPostgresProcess, type PostgresProcess } from './postgres-process';
import { spawnTs, spawnWorker, stopProcess } from './processes';
import { waitForReady } from './ready';
import {
  registerNamespace,
  setUpTemporalSchemas,
  startTemporalServer,
  startTemporalUi,
  temporalDatabaseOf,
  temporalServerPorts,
  TEMPORAL_SERVER,
  TEMPORAL_SQL_TOOL,
  TEMPORAL_UI,
  type TemporalServer,
  type TemporalServerPorts,
} from './temporal-server';

/**
 * Keel's production topology on one machine: a real Temporal server on PostgreSQL, N workers and M APIs, each a
 * process of its own, and the Web UI. `npm run cluster` runs it; the cluster soak and bench break it one part at a
 * time (a worker or an API killed, the Temporal server or PostgreSQL restarted).
 */
export interface ClusterOptions {
  workers: number;
  apis: number;
  /** Where the embedded PostgreSQL keeps its data (unless databaseUrl is given), and the stack its development keys. */
  dataDir: string;
  temporal: TemporalServerPorts;
  /** The first API's port; the next ones follow. */
  apiPort: number;
  /** The Web UI's port; none when omitted. */
  uiPort?: number;
  /** A PostgreSQL server for Keel's database and Temporal's two; otherwise an embedded one on pgPort. */
  databaseUrl?: string;
  pgPort: number;
  namespace?: string;
  taskQueue?: string;
  /** Run the workers as this Worker Deployment version (the first build makes itself current: docs/deploy.md). */
  deployment?: WorkerDeployment;
  /** More environment for Keel's workers and APIs (KEEL_SECRETS_KEY and KEEL_PAYLOAD_KEYS given here win). */
  env?: Record<string, string>;
  /** Where every process's output goes (appended); the terminal otherwise. */
  logFile?: string;
  log?: (line: string) => void;
}

export interface ClusterStack {
  temporalAddress: string;
  databaseUrl: string;
  /** Each API's base URL, the first on apiPort. */
  apis: string[];
  /** The Web UI's URL and process, or why there is none. */
  ui: { url: string; process: ChildProcess } | { unavailable: string };
  /** The embedded PostgreSQL, when it runs one (a new one after restartPostgres). */
  postgres(): PostgresProcess | undefined;
  namespace: string;
  taskQueue: string;
  /** The payload codecs of the stack's workers and APIs, for a client of its caller's. */
  dataConverter: DataConverter;
  /** Where the keys every worker and API has come from: a setting's name or a file; no payload key when clear. */
  keys: { secrets: string; payloads?: string };
  workers(): ChildProcess[];
  apiProcesses(): ChildProcess[];
  /** The Temporal server's process (a new one after restartTemporal). */
  temporalServer(): ChildProcess;
  /**
   * Starts one more worker with more environment (another build's KEEL_BUILD_ID and KEEL_WORKFLOW_BUNDLE, say); it
   * gets the next index and stops with the stack.
   */
  addWorker(env: Record<string, string>): ChildProcess;
  /** kill -9 one worker, then start another in its place (it resumes every workflow from history). */
  killWorker(i: number): Promise<void>;
  /** kill -9 one API (its requests in flight fail), then start it again on the same port. */
  killApi(i: number): Promise<void>;
  /** Stops the Temporal server and starts it again on the same databases and ports. */
  restartTemporal(): Promise<void>;
  /** Stops the embedded PostgreSQL and starts it again on the same data and port. */
  restartPostgres(downMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Free ports for the server: a frontend block (frontend … frontend + 10) and a membership block, both below the
 * kernel's ephemeral range. The server binds each service's ports only as that service starts, seconds after they
 * were chosen: a port in the ephemeral range could meanwhile become the local port of some outgoing connection, and
 * the server would exit with "address already in use" (CI met it now and then).
 */
export async function freeTemporalPorts(): Promise<TemporalServerPorts> {
  const frontend = await freePortBlock(11);
  const frontendBlock = new Set(Array.from({ length: 11 }, (_, i) => frontend + i));
  return { frontend, membership: await freePortBlock(7, frontendBlock) };
}

/**
 * Free ports for a whole throwaway cluster (tests, soak, bench): the Temporal server's, PostgreSQL's and a run of
 * `apis` consecutive ones for the APIs. The server binds its other services' ports only once it starts, so Keel's
 * are kept off them.
 */
export async function freeClusterPorts(apis: number): Promise<Pick<ClusterOptions, 'temporal' | 'pgPort' | 'apiPort'>> {
  const temporal = await freeTemporalPorts();
  const avoid = new Set(temporalServerPorts(temporal));
  let pgPort = await freePort();
  while (avoid.has(pgPort)) pgPort = await freePort();
  avoid.add(pgPort);
  for (;;) {
    const apiPort = await freePort();
    const run = Array.from({ length: apis }, (_, i) => apiPort + i);
    if (run.some((p) => avoid.has(p) || p > 65_535)) continue;
    const taken = await Promise.all(run.slice(1).map((p) => portOpen(p)));
    if (!taken.some(Boolean)) return { temporal, pgPort, apiPort };
  }
}

/**
 * The stack's keys for secrets at rest and for Temporal's payloads, as npm start has them: the caller's (its env,
 * then the environment), else development keys made into the data folder, so a restart on the same data reads what
 * was sealed, and a throwaway folder takes its keys with it. Without a secrets key every webhook secret and tool
 * server header would be refused (issue 50).
 */
function stackKeys(
  o: Pick<ClusterOptions, 'dataDir' | 'env'>,
  log: (line: string) => void,
): { env: Record<string, string>; where: ClusterStack['keys'] } {
  const given = loadConfig({ ...process.env, ...o.env });
  const keyOf = (value: string | undefined, setting: string, file: string, what: string) =>
    value ? { key: value, where: setting } : devKey(o.dataDir, file, setting, what, log);
  const secrets = keyOf(given.secretsKey, 'KEEL_SECRETS_KEY', 'secrets.key', 'secrets at rest');
  const payloads =
    given.payloads.encryption === 'off'
      ? undefined
      : keyOf(given.payloads.keys, 'KEEL_PAYLOAD_KEYS', 'payloads.key', "Temporal's payloads");
  return {
    env: { KEEL_SECRETS_KEY: secrets.key, ...(payloads ? { KEEL_PAYLOAD_KEYS: payloads.key } : {}) },
    where: { secrets: secrets.where, ...(payloads ? { payloads: payloads.where } : {}) },
  };
}

export async function startClusterStack(o: ClusterOptions): Promise<ClusterStack> {
  const log = o.log ?? ((line: string) => console.log(line));
  const stdio: StdioOptions = o.logFile ? ['ignore', openSync(o.logFile, 'a'), openSync(o.logFile, 'a')] : 'inherit';
  const namespace = o.namespace ?? 'default';
  const taskQueue = o.taskQueue ?? 'keel';
  const serverBinary = ensureGoTool(TEMPORAL_SERVER, log);
  const sqlTool = path.join(path.dirname(serverBinary), TEMPORAL_SQL_TOOL);
  const keys = stackKeys(o, log);
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => undefined);
  };

  try {
    let pg: PostgresProcess | undefined;
    const startPg = () => startPostgresProcess({ dataDir: path.join(o.dataDir, 'postgres'), port: o.pgPort });
    if (!o.databaseUrl) {
      log('keel: starting the embedded PostgreSQL…');
      pg = await startPg();
      stops.push(() => pg!.stop());
    }
    const databaseUrl = o.databaseUrl ?? pg!.url;
    await migrate(databaseUrl);
    const db = temporalDatabaseOf(databaseUrl);
    log('keel: setting up the Temporal and visibility schemas…');
    await setUpTemporalSchemas(sqlTool, db);

    log('keel: starting the Temporal server…');
    const startServer = () => startTemporalServer({ binary: serverBinary, ports: o.temporal, db, stdio });
    let server: TemporalServer = await startServer();
    stops.push(() => server.stop());
    await registerNamespace(server.address, namespace);

    let ui: ClusterStack['ui'] = { unavailable: 'not asked for' };
    if (o.uiPort) {
      try {
        const started = await startTemporalUi({
          binary: ensureGoTool(TEMPORAL_UI, log),
          port: o.uiPort,
          temporalAddress: server.address,
          // The UI decodes Keel's sealed payloads through the first API's codec server (api/routes/codec.ts).
          codecEndpoint: `http://127.0.0.1:${o.apiPort}/codec`,
          stdio,
        });
        stops.push(() => started.stop());
        ui = { url: started.url, process: started.process };
      } catch (err) {
        ui = { unavailable: err instanceof Error ? err.message : String(err) };
      }
    }

    const env = {
      ...process.env,
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: server.address,
      TEMPORAL_NAMESPACE: namespace,
      KEEL_TASK_QUEUE: taskQueue,
      // As npm start: local receivers and fakes listen on loopback, allowed explicitly.
      KEEL_EGRESS_ALLOW: withLoopback(process.env.KEEL_EGRESS_ALLOW),
      ...keys.env,
      // The codec server lets a browser call it from the UI's origin alone.
      ...('url' in ui && !process.env.KEEL_TEMPORAL_UI_URL ? { KEEL_TEMPORAL_UI_URL: ui.url } : {}),
      ...(o.deployment ? { KEEL_BUILD_ID: o.deployment.buildId, KEEL_DEPLOYMENT_NAME: o.deployment.name } : {}),
      ...o.env,
    };
    const keelStdio: StdioOptions = o.logFile ? stdio : 'inherit';
    const metricsPorts = await Promise.all(Array.from({ length: o.workers }, () => freePort()));
    const workerEnvs: Record<string, string>[] = metricsPorts.map((p) => ({
      KEEL_WORKER_METRICS_ADDRESS: `127.0.0.1:${p}`,
    }));
    const startWorker = (i: number) => spawnWorker({ ...env, ...workerEnvs[i] }, keelStdio);
    const apiPorts = Array.from({ length: o.apis }, (_, i) => o.apiPort + i);
    const spawnApi = (i: number) =>
      spawnTs(
        'api/main.ts',
        {
          ...env,
          KEEL_API_PORT: String(apiPorts[i]),
          KEEL_WORKER_METRICS_URL: `http://127.0.0.1:${metricsPorts[0]}/metrics`,
        },
        keelStdio,
      );
    const workers = Array.from({ length: o.workers }, (_, i) => startWorker(i));
    const apiProcesses = Array.from({ length: o.apis }, (_, i) => spawnApi(i));
    stops.push(() => Promise.all([...workers, ...apiProcesses].map((c) => stopProcess(c))).then(() => undefined));
    const apis = apiPorts.map((p) => `http://127.0.0.1:${p}`);
    const ready = (api: string) => waitForReady(`${api}/healthz`, server.address, namespace, taskQueue, 120_000);
    await Promise.all(apis.map(ready));

    const killed = async (child: ChildProcess) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    };
    return {
      temporalAddress: server.address,
      databaseUrl,
      dataConverter: payloadEncryptionOfEnv(env, 'cluster').dataConverter,
      keys: keys.where,
      apis,
      ui,
      postgres: () => pg,
      namespace,
      taskQueue,
      workers: () => workers,
      apiProcesses: () => apiProcesses,
      temporalServer: () => server.process,
      addWorker(extra) {
        workerEnvs.push(extra);
        const child = startWorker(workerEnvs.length - 1);
        workers.push(child);
        return child;
      },
      async killWorker(i) {
        await killed(workers[i]!);
        workers[i] = startWorker(i);
        await ready(apis[0]!);
      },
      async killApi(i) {
        await killed(apiProcesses[i]!);
        apiProcesses[i] = spawnApi(i);
        await ready(apis[i]!);
      },
      async restartTemporal() {
        await server.stop();
        server = await startServer();
      },
      async restartPostgres(downMs = 0) {
        if (!pg) throw new Error('PostgreSQL is not embedded here (DATABASE_URL): restart it yourself');
        await pg.stop();
        if (downMs) await new Promise((r) => setTimeout(r, downMs));
        pg = await startPg();
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
