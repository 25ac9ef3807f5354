/**
 * `npm run bench -- --cluster`: Keel's turns per second and turn latency on the production topology (a Temporal
 * server on PostgreSQL, scripts/cluster-stack.ts) with 1, 2 and 3 workers and 2 APIs, and the same workload on the
 * dev-server stack, each in a fresh stack, one after another on this machine. CPU is read per component from /proc,
 * because on 2 cores more workers share the same CPU: the figures say where it goes rather than promise scaling.
 * Writes bench/CLUSTER.md and bench/cluster-results.json (BENCH_OUT elsewhere for a try).
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freeClusterPorts, startClusterStack } from '../scripts/cluster-stack';
import { startKeelStack } from '../scripts/keel-stack';
import { REPO_ROOT } from '../scripts/processes';
import { TEMPORAL_SERVER_VERSION } from '../scripts/temporal-server';
import { bundleWorkflows } from '../worker/bundle';
import { pool, submit } from './drive';
import { percentile, round } from './measure';
import { processTreeSeconds } from './soak/cpu';

const CONVERSATIONS = Number(process.env.BENCH_CLUSTER_CONVERSATIONS ?? 60);
const TURNS = Number(process.env.BENCH_CLUSTER_TURNS ?? 5);
const OUT = process.env.BENCH_OUT ?? path.join(REPO_ROOT, 'bench');

interface Topology {
  name: string;
  apis: string[];
  /** Processes whose CPU is read, by component. */
  pids: () => Record<string, number[]>;
  stop(): Promise<void>;
}

interface Result {
  topology: string;
  turns: number;
  seconds: number;
  turnsPerSecond: number;
  p50Ms: number;
  p95Ms: number;
  /** CPU seconds per turn, by component. */
  cpuPerTurn: Record<string, number>;
}

async function measure(t: Topology): Promise<Result> {
  const cpuOf = async () => {
    const out: Record<string, number> = {};
    for (const [role, pids] of Object.entries(t.pids())) {
      out[role] = 0;
      for (const pid of pids) out[role] += await processTreeSeconds(pid);
    }
    return out;
  };
  // A warm-up turn per API, so that no topology pays its first bundle load or connection inside the measurement.
  await Promise.all(t.apis.map((api, i) => submit({ api }, `warm-${i}`, { text: 'warm up' }, 60)));
  const run = Math.random().toString(36).slice(2, 8);
  const latencies: number[] = [];
  const cpu0 = await cpuOf();
  const t0 = performance.now();
  await pool(CONVERSATIONS, CONVERSATIONS, async (c) => {
    const api = t.apis[c % t.apis.length]!;
    for (let i = 1; i <= TURNS; i++) {
      const started = performance.now();
      const r = await submit({ api }, `cl-${run}-${c}`, { text: `turn ${i}`, messageId: `cl-${run}-${c}-${i}` }, 60);
      if (r.status !== 'replied') throw new Error(`${t.name}: turn ${c}/${i} ended ${r.status}`);
      latencies.push(performance.now() - started);
    }
  });
  const seconds = (performance.now() - t0) / 1000;
  const cpu1 = await cpuOf();
  const turns = CONVERSATIONS * TURNS;
  return {
    topology: t.name,
    turns,
    seconds: round(seconds, 2),
    turnsPerSecond: round(turns / seconds, 2),
    p50Ms: Math.round(percentile(latencies, 50)),
    p95Ms: Math.round(percentile(latencies, 95)),
    cpuPerTurn: Object.fromEntries(Object.keys(cpu1).map((k) => [k, round((cpu1[k]! - (cpu0[k] ?? 0)) / turns, 4)])),
  };
}

async function devServer(bundle: Record<string, string>): Promise<Topology> {
  const stack = await startKeelStack({ logFile: path.join(os.tmpdir(), 'keel-bench-cluster.log'), env: bundle });
  return {
    name: 'dev server (SQLite), 1 worker, 1 API',
    apis: [stack.api],
    pids: () => ({ workers: [stack.worker().pid!], apis: [stack.apiProcess().pid!] }),
    stop: () => stack.stop(),
  };
}

async function cluster(workers: number, bundle: Record<string, string>): Promise<Topology> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'keel-bench-cluster-'));
  await chmod(dataDir, 0o755); // as root PostgreSQL runs as the postgres user, who must enter it
  const stack = await startClusterStack({
    workers,
    apis: 2,
    dataDir,
    ...(await freeClusterPorts(2)),
    env: { KEEL_LOG_LEVEL: 'warn', KEEL_MODEL: 'scripted', ...bundle },
    logFile: path.join(os.tmpdir(), 'keel-bench-cluster.log'),
    log: () => undefined,
  });
  return {
    name: `cluster (Temporal ${TEMPORAL_SERVER_VERSION} on PostgreSQL), ${workers} worker(s), 2 APIs`,
    apis: stack.apis,
    pids: () => {
      const pg = stack.postgres();
      return {
        workers: stack.workers().map((w) => w.pid!),
        apis: stack.apiProcesses().map((a) => a.pid!),
        temporal: [stack.temporalServer().pid!],
        ...(pg ? { postgres: [pg.process.pid!] } : {}),
      };
    },
    stop: async () => {
      await stack.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

function report(results: Result[], startedAt: Date, minutes: number): string {
  const roles = ['workers', 'apis', 'temporal', 'postgres'];
  const cpu = (r: Result, k: string) => r.cpuPerTurn[k]?.toFixed(4) ?? '–';
  return [
    '# Keel on a cluster: turns per second with 1, 2 and 3 workers',
    '',
    `Run ${startedAt.toISOString()} by \`npm run bench -- --cluster\` (${round(minutes, 1)} minutes), on ` +
      `${os.cpus().length} × ${os.cpus()[0]?.model.split(' ').slice(0, 2).join(' ')}, ` +
      `${round(os.totalmem() / 2 ** 30, 1)} GiB, Node ${process.version}.`,
    `Workload: ${CONVERSATIONS} concurrent conversations × ${TURNS} turns each (each turn awaited with ` +
      '`?wait=60`), spread over the APIs; the scripted model at zero delay. Each topology is a fresh stack on this ' +
      'one machine; the same prebuilt workflow bundle everywhere.',
    '',
    '| topology | turns/s | turn p50 ms | turn p95 ms | CPU s/turn: workers | APIs | Temporal | PostgreSQL (all) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...results.map(
      (r) =>
        `| ${r.topology} | ${r.turnsPerSecond} | ${r.p50Ms} | ${r.p95Ms} | ` +
        `${roles.map((k) => cpu(r, k)).join(' | ')} |`,
    ),
    '',
    'The dev server runs Temporal inside the CLI process, which is not sampled here (its CPU is in none of the ' +
      "columns); the cluster's Temporal column is the server process (every service in one), and PostgreSQL's is " +
      'its whole process tree (the postmaster and every backend).',
    '',
  ].join('\n');
}

export async function clusterBench(): Promise<void> {
  const startedAt = new Date();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'keel-bench-bundle-'));
  const bundlePath = path.join(dir, 'workflows.js');
  await writeFile(bundlePath, await bundleWorkflows());
  const bundle = { KEEL_WORKFLOW_BUNDLE: bundlePath };
  const results: Result[] = [];
  try {
    for (const start of [
      () => devServer(bundle),
      () => cluster(1, bundle),
      () => cluster(2, bundle),
      () => cluster(3, bundle),
    ]) {
      const topology = await start();
      try {
        console.log(`bench: ${topology.name}…`);
        const r = await measure(topology);
        console.log(`bench:   ${r.turnsPerSecond} turns/s, p50 ${r.p50Ms} ms, p95 ${r.p95Ms} ms`);
        results.push(r);
      } finally {
        await topology.stop();
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const minutes = (Date.now() - startedAt.getTime()) / 60_000;
  await writeFile(path.join(OUT, 'cluster-results.json'), `${JSON.stringify({ startedAt, results }, null, 2)}\n`);
  await writeFile(path.join(OUT, 'CLUSTER.md'), report(results, startedAt, minutes));
  console.log(`bench: wrote ${path.join(OUT, 'CLUSTER.md')}`);
}
