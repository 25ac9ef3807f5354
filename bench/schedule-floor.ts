/**
 * The Schedule floor alone (issue 27): bench/burst.ts's floor, `--schedules` bare Temporal Schedules (200) firing at
 * one second, on a fresh server with Keel's dynamic config, `--runs` times (2). Prints fire → start of their
 * workflows: p50, p99 and the last.
 *
 *   npx tsx bench/schedule-floor.ts [--cluster] [--without key,key] [--sqlite k=v,k=v] [--footprint]
 *     [--schedules 200] [--runs 2]
 *
 * The dev server Keel starts (SQLite), or with --cluster `npm run cluster`'s Temporal server on an embedded
 * PostgreSQL. --without drops those keys from deploy/temporal/dynamicconfig.yaml: the floor before they were set.
 * --footprint runs, after each floor, Temporal's part of a Keel job run the same way (bench/burst.ts).
 * --sqlite gives the dev server's SQLite file those pragmas instead of Keel's (`journal_mode=delete`: SQLite's own).
 */
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { parse, stringify } from 'yaml';
import { freeTemporalPorts } from '../scripts/cluster-stack';
import { DYNAMIC_CONFIG_FILE, dynamicConfigArgs, SQLITE_PRAGMAS, startDevServer } from '../scripts/dev-server';
import { ensureGoTool } from '../scripts/go-tools';
import { freePort } from '../scripts/ports';
import { startPostgresProcess } from '../scripts/postgres-process';
import { spawnTs, stopProcess } from '../scripts/processes';
import {
  registerNamespace,
  setUpTemporalSchemas,
  startTemporalServer,
  temporalDatabaseOf,
  TEMPORAL_SERVER,
  TEMPORAL_SQL_TOOL,
} from '../scripts/temporal-server';
import { floorBurst } from './burst';
import { payloadEncryptionOfEnv } from '../services/payload-encryption';
import { BENCH_QUEUE } from './drive';

const { values: args } = parseArgs({
  options: {
    cluster: { type: 'boolean', default: false },
    without: { type: 'string', default: '' },
    sqlite: { type: 'string' },
    footprint: { type: 'boolean', default: false },
    schedules: { type: 'string', default: '200' },
    runs: { type: 'string', default: '2' },
  },
});

/** Keel's dynamic config less the `without` keys, in `dir`; Keel's own file when none are dropped. */
function dynamicConfig(dir: string, without: string[]): string {
  if (without.length === 0) return DYNAMIC_CONFIG_FILE;
  const config = parse(readFileSync(DYNAMIC_CONFIG_FILE, 'utf8')) as Record<string, unknown>;
  for (const key of without) {
    if (!(key in config)) throw new Error(`${key} is not in ${DYNAMIC_CONFIG_FILE}`);
    delete config[key];
  }
  const file = path.join(dir, 'dynamicconfig.yaml');
  writeFileSync(file, stringify(config));
  return file;
}

/** `k=v,k=v` as pragmas. */
const pragmasOf = (list: string) =>
  Object.fromEntries(
    list
      .split(',')
      .filter(Boolean)
      .map((kv) => kv.split('=', 2) as [string, string]),
  );

/** Starts a server; resolves to its address and how to stop everything it started. */
async function startServer(dir: string, configFile: string, log: number) {
  if (!args.cluster) {
    const dev = await startDevServer({
      port: await freePort(),
      dbFile: path.join(dir, 'temporal.db'),
      dynamicConfigFile: configFile,
      ...(args.sqlite === undefined ? {} : { sqlitePragmas: pragmasOf(args.sqlite) }),
      stdio: 'ignore',
    });
    return { address: dev.address, stop: () => dev.stop() };
  }
  const binary = ensureGoTool(TEMPORAL_SERVER);
  const pg = await startPostgresProcess({ dataDir: path.join(dir, 'postgres'), port: await freePort() });
  try {
    const db = temporalDatabaseOf(pg.url);
    await setUpTemporalSchemas(path.join(path.dirname(binary), TEMPORAL_SQL_TOOL), db);
    // startTemporalServer always gives the server Keel's file: a variant goes in by a wrapper that sets it anew.
    let server = binary;
    if (configFile !== DYNAMIC_CONFIG_FILE) {
      server = path.join(dir, 'server.sh');
      writeFileSync(server, `#!/bin/sh\nTEMPORAL_DYNAMIC_CONFIG='${configFile}' exec '${binary}' "$@"\n`);
      chmodSync(server, 0o755);
    }
    const temporal = await startTemporalServer({
      binary: server,
      ports: await freeTemporalPorts(),
      db,
      stdio: ['ignore', log, log],
    });
    await registerNamespace(temporal.address, 'default');
    return { address: temporal.address, stop: () => temporal.stop().finally(() => pg.stop()) };
  } catch (err) {
    await pg.stop();
    throw err;
  }
}

/** bench/worker.ts, for the floor's empty workflow; resolves once it polls. */
async function startWorker(address: string): Promise<ChildProcess> {
  const worker = spawnTs(
    'bench/worker.ts',
    { ...process.env, TEMPORAL_ADDRESS: address, BENCH_TASK_QUEUE: BENCH_QUEUE },
    ['ignore', 'pipe', 'inherit'],
  );
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: worker.stdout! }).on('line', (l) => l === 'bench worker ready' && resolve());
    worker.once('exit', (code) => reject(new Error(`bench worker exited (${code})`)));
  });
  return worker;
}

async function main(): Promise<void> {
  const without = args.without.split(',').filter(Boolean);
  const count = Number(args.schedules);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'keel-schedule-floor-'));
  const configFile = dynamicConfig(dir, without);
  const where = args.cluster ? 'the cluster server (v1.29.1, PostgreSQL)' : 'the dev server (SQLite)';
  console.log(`schedule-floor: ${where}, ${count} Schedules, without: ${without.join(', ') || 'nothing'}`);
  if (!args.cluster) console.log(`schedule-floor: SQLite ${args.sqlite ?? JSON.stringify(SQLITE_PRAGMAS)}`);
  const values = dynamicConfigArgs(configFile).filter((_, i) => i % 2 === 1);
  console.log(`schedule-floor: dynamic config ${values.join(' ')}`);
  const log = path.join(dir, 'server.log');
  const server = await startServer(dir, configFile, openSync(log, 'a'));
  let worker: ChildProcess | undefined;
  const stopAll = async () => {
    if (worker) await stopProcess(worker);
    await server.stop();
  };
  // Ctrl-C stops every process this run started.
  for (const sig of ['SIGINT', 'SIGTERM'] as const)
    process.once(sig, () => void stopAll().finally(() => process.exit(130)));
  let failed = true;
  try {
    worker = await startWorker(server.address);
    const connection = await Connection.connect({ address: server.address });
    try {
      // As the floor's worker seals (with KEEL_PAYLOAD_KEYS when set), so does this client.
      const client = new Client({
        connection,
        dataConverter: payloadEncryptionOfEnv(process.env, 'bench').dataConverter,
      });
      for (let run = 1; run <= Number(args.runs); run++) {
        for (const shape of args.footprint ? (['empty', 'footprint'] as const) : (['empty'] as const)) {
          const floor = await floorBurst(client, count, shape);
          const { p50, p99, max } = floor.delayMs;
          console.log(
            `schedule-floor: run ${run}${args.footprint ? ` (${shape})` : ''}: ` +
              `fire → start p50 ${p50} ms, p99 ${p99} ms, last ${max} ms; last closed ${floor.lastClosedMs} ms` +
              (floor.createdLateByMs ? ` (created ${floor.createdLateByMs} ms late)` : '') +
              // Other work on the machine slows the server: the figures of a loaded one are not the floor.
              `; load ${os.loadavg()[0]!.toFixed(1)}`,
          );
        }
      }
      failed = false;
    } finally {
      await connection.close();
    }
  } finally {
    await stopAll();
    // A failed run keeps the server's log (--cluster) and data to look into.
    if (failed) console.error(`schedule-floor: kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error('schedule-floor failed:', err);
  process.exit(1);
});
