import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { parse } from 'yaml';
import { ALL_SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { exitedEarly, REPO_ROOT, spawnKeepingTail, stopProcess } from './processes';
import { ensureTemporalCli, type TemporalCli } from './temporal-cli';

export interface DevServerOptions {
  port: number;
  /** Web UI port; omit for a headless server (tests). */
  uiPort?: number;
  /** The codec server the Web UI decodes payloads through (Keel's API, /codec). */
  codecEndpoint?: string;
  /** SQLite file; omit for an in-memory server. */
  dbFile?: string;
  namespace?: string;
  /** A variant of Keel's dynamic config file (a bench's, without some values); Keel's otherwise. */
  dynamicConfigFile?: string;
  /** SQLite pragmas for a file database; Keel's by default (a bench measures others). */
  sqlitePragmas?: Record<string, string>;
  extraArgs?: string[];
  stdio?: 'inherit' | 'ignore';
}

export interface DevServer {
  address: string;
  process: ChildProcess;
  /** The CLI it runs, and which way Keel got it (npm start's banner says). */
  cli: TemporalCli;
  stop(): Promise<void>;
}

/** The dev server's arguments: Keel's search attributes, and a SQLite file so history survives restarts. */
export function devServerArgs(o: DevServerOptions): string[] {
  return [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(o.port),
    '--namespace',
    o.namespace ?? 'default',
    '--log-level',
    'error',
    ...(o.uiPort ? ['--ui-port', String(o.uiPort)] : ['--headless']),
    ...(o.uiPort && o.codecEndpoint ? ['--ui-codec-endpoint', o.codecEndpoint] : []),
    ...(o.dbFile ? ['--db-filename', o.dbFile] : []),
    ...(o.dbFile ? pragmaArgs(o.sqlitePragmas ?? SQLITE_PRAGMAS) : []),
    ...ALL_SEARCH_ATTRIBUTES.flatMap((k) => ['--search-attribute', `${k.name}=Keyword`]),
    ...dynamicConfigArgs(o.dynamicConfigFile ?? DYNAMIC_CONFIG_FILE),
    ...DEV_SERVER_DYNAMIC_CONFIG.flatMap((v) => ['--dynamic-config-value', v]),
    ...(o.extraArgs ?? []),
  ];
}

/**
 * The dev server's SQLite file in write-ahead-log mode. SQLite's default rollback journal writes a journal file and
 * syncs it and the database on every commit, and the server's one connection waits out each sync: 200 bare Schedules
 * took 7.3-7.5 s to start their workflows, 4.0 s with a WAL (bench/SCHEDULES.md). `synchronous=full` still syncs the
 * log on every commit, so a commit survives a power loss as PostgreSQL's do: the two stores stay in step.
 */
export const SQLITE_PRAGMAS: Record<string, string> = { journal_mode: 'wal', synchronous: 'full' };

const pragmaArgs = (pragmas: Record<string, string>) =>
  Object.entries(pragmas).flatMap(([k, v]) => ['--sqlite-pragma', `${k}=${v}`]);

/**
 * The dev server's own dynamic config, beyond the file it shares with the cluster: one partition per task queue. A
 * queue has four by default, to spread its load over matching hosts; the dev server has one. With four, a task
 * written to a partition no poll waited at stayed there about 2 s, until a poll reached it: one run in a burst of 200
 * closed 2 s after all the others (bench/CHANGES-TRIED.md).
 */
export const DEV_SERVER_DYNAMIC_CONFIG = [
  'matching.numTaskqueueReadPartitions=1',
  'matching.numTaskqueueWritePartitions=1',
];

/** Keel's Temporal dynamic config, also the cluster's. */
export const DYNAMIC_CONFIG_FILE = path.join(REPO_ROOT, 'deploy', 'temporal', 'dynamicconfig.yaml');

/** A dynamic config file as dev server flags, each value as JSON (a map as an object, its durations as strings). */
export function dynamicConfigArgs(file: string): string[] {
  const config = parse(readFileSync(file, 'utf8')) as Record<string, { value: unknown; constraints?: object }[]>;
  return Object.entries(config).flatMap(([key, values]) => {
    // The flags set a value for every namespace and task queue: only the file's unconstrained values apply.
    const everywhere = values.find((v) => Object.keys(v.constraints ?? {}).length === 0);
    return everywhere ? ['--dynamic-config-value', `${key}=${JSON.stringify(everywhere.value)}`] : [];
  });
}

export async function startDevServer(o: DevServerOptions): Promise<DevServer> {
  const cli = await ensureTemporalCli();
  if (o.dbFile) mkdirSync(path.dirname(o.dbFile), { recursive: true });
  const { child, tail } = spawnKeepingTail(cli.path, devServerArgs(o), { stdio: o.stdio ?? 'inherit' });
  const address = `127.0.0.1:${o.port}`;
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) => reject(exitedEarly('the Temporal dev server', code, signal, tail))),
  );
  exited.catch(() => undefined);
  const stop = () => stopProcess(child, 15_000);
  try {
    await Promise.race([waitForTemporal(address, 60_000), exited]);
  } catch (err) {
    await stop(); // never leave a half-started server behind
    throw err;
  }
  return { address, process: child, cli, stop };
}

/** Resolves once the frontend answers and the namespace exists (`null`: the frontend alone, before any namespace). */
export async function waitForTemporal(
  address: string,
  timeoutMs: number,
  namespace: string | null = 'default',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        if (namespace === null) await connection.workflowService.getSystemInfo({});
        else await connection.workflowService.describeNamespace({ namespace });
        return;
      } finally {
        await connection.close();
      }
    } catch (err) {
      lastError = err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error(
    `Temporal at ${address} did not become ready in ${timeoutMs} ms: ` +
      (lastError instanceof Error ? lastError.message : String(lastError)),
  );
}
