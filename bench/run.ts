/**
 * `npm run bench`: Keel's costs measured side by side with the floors they are held to, in one run on one Temporal
 * dev server and one PostgreSQL, with the scripted model at zero delay, so the figures are ratios that survive a
 * noisy machine. Writes results.json (every figure) and REPORT.md (goals, tables, and where the time goes).
 *
 *   heap         the workflow bundle's size and the heap one cached conversation workflow keeps
 *   overhead     submit → reply over 200 sequential turns, against a bare chain of empty activities
 *   sealed       submit → reply over 100 sequential turns, sealed (this Keel) against a second Keel in clear text
 *   history      bytes per turn over 200 turns, against the minimal turn and a transcript-in-history workflow
 *   throughput   100 concurrent conversations × 5 turns, against the bare floor at the same concurrency
 *   costs        Temporal actions and PostgreSQL writes per turn, delegate run and routine run
 *   burst        200 jobs due at the same second, against 200 bare Schedules firing at once
 *   idle         10,000 one-turn conversations, then idle: memory, running workflows, the first turn after idle
 *
 * BENCH_SCALE (default 1) multiplies the counts down for a quick try (e.g. 0.1); BENCH_ONLY=idle,burst runs only
 * those scenarios; BENCH_OUT is where the report goes (bench/ for a full run, a temporary folder otherwise, so a
 * partial run never replaces the committed report). BENCH_IDLE_MS (default 20000) is the stack's
 * KEEL_CONVERSATION_IDLE_MS; the worker's KEEL_WORKER_* settings pass through from the environment. The worker loads
 * a workflow bundle built before it starts (BENCH_BUNDLE=worker: it bundles its own, as `npm run worker` does).
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { rssMiB, startKeelStack } from '../scripts/keel-stack';
import { newSecretKey } from '../services/secrets';
import { freePort } from '../scripts/ports';
import { REPO_ROOT, spawnTs, stopProcess } from '../scripts/processes';
import { bundleWorkflows } from '../worker/bundle';
import { pgNoise, type PgCounters } from './actions';
import { burstRun } from './burst';
import { costsRun } from './costs';
import { BENCH_QUEUE } from './drive';
import { idleConversations } from './idle';
import { workflowHeap } from './workflow-heap';
import { round } from './measure';
import { writeReport, type BenchResults } from './report';
import { clusterBench } from './cluster';
import { spendBench } from './spend';
import { sealedOverhead } from './sealed';
import { historyGrowth, keelTurnShape, throughputRun, turnOverhead, type TurnShape } from './scenarios';

const SCENARIOS = ['heap', 'overhead', 'sealed', 'history', 'throughput', 'costs', 'burst', 'idle'] as const;
type Scenario = (typeof SCENARIOS)[number];

const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const n = (full: number) => Math.max(2, Math.round(full * SCALE));
const ONLY = (process.env.BENCH_ONLY ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
for (const s of ONLY)
  if (!(SCENARIOS as readonly string[]).includes(s)) throw new Error(`BENCH_ONLY: no scenario ${s}`);
const selected = SCENARIOS.filter((s) => ONLY.length === 0 || ONLY.includes(s));
const IDLE_MS = process.env.BENCH_IDLE_MS ?? '20000';
const BUNDLE = process.env.BENCH_BUNDLE === 'worker' ? 'worker' : 'prebuilt';
/** The worker's settings the report names (the defaults apply to those not set). */
const WORKER_SETTINGS = [
  'KEEL_WORKER_CACHED_WORKFLOWS',
  'KEEL_WORKER_WORKFLOW_TASK_SLOTS',
  'KEEL_WORKER_ACTIVITY_SLOTS',
  'KEEL_WORKER_LOCAL_ACTIVITY_SLOTS',
  'KEEL_WORKER_TUNER',
];

async function main(): Promise<void> {
  const started = new Date();
  const full = SCALE === 1 && selected.length === SCENARIOS.length;
  const out =
    process.env.BENCH_OUT ??
    (full ? path.join(REPO_ROOT, 'bench') : await mkdtemp(path.join(os.tmpdir(), 'keel-bench-')));
  const logFile = path.join(os.tmpdir(), `keel-bench-${process.pid}.log`);
  console.log(`bench: scale ${SCALE}, ${selected.join(', ')}; report to ${out}; Keel's logs in ${logFile}`);
  // The worker's Temporal metrics give its cache size to the idle scenario.
  const metricsPort = await freePort();
  // A deployed worker loads a bundle built beforehand, as the soak's does: a worker that bundles its own workflows
  // keeps webpack's memory for good, which is no conversation's cost (BENCH_BUNDLE=worker measures that instead).
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'keel-bench-bundle-'));
  const bundle = BUNDLE === 'prebuilt' ? path.join(workDir, 'workflow-bundle.js') : undefined;
  if (bundle) await writeFile(bundle, await bundleWorkflows());
  const bundleEnv: Record<string, string> = bundle ? { KEEL_WORKFLOW_BUNDLE: bundle } : {};
  // Keel runs sealed, as npm start runs it; the floors' worker and the bench's client seal with the same key, so each
  // floor pays what Keel pays for it (the `sealed` scenario sets encryption's own cost against a clear Keel).
  const payloadKeys = process.env.KEEL_PAYLOAD_KEYS ?? newSecretKey('bench');
  const stack = await startKeelStack({
    logFile,
    env: {
      KEEL_PAYLOAD_KEYS: payloadKeys,
      KEEL_JOB_CATCHUP_WINDOW_MS: '600000',
      KEEL_CONVERSATION_IDLE_MS: IDLE_MS,
      KEEL_WORKER_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
      ...bundleEnv,
    },
  });
  const benchWorker = spawnTs(
    'bench/worker.ts',
    {
      ...process.env,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      BENCH_TASK_QUEUE: BENCH_QUEUE,
      BENCH_DATABASE_URL: stack.databaseUrl,
      KEEL_PAYLOAD_KEYS: payloadKeys,
    },
    ['ignore', 'pipe', 'inherit'],
  );
  // Ctrl-C or a CI timeout stops every process this run started, leaving no orphans behind.
  for (const sig of ['SIGINT', 'SIGTERM'] as const)
    process.once(
      sig,
      () => void Promise.all([stopProcess(benchWorker), stack.stop()]).finally(() => process.exit(130)),
    );
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: benchWorker.stdout! }).on('line', (l) => l === 'bench worker ready' && resolve());
    benchWorker.once('exit', (code) => reject(new Error(`bench worker exited (${code})`)));
  });
  const connection = await Connection.connect({ address: stack.temporalAddress });
  const client = new Client({ connection, dataConverter: stack.dataConverter });
  const db = new pg.Pool({ connectionString: stack.databaseUrl, max: 4 });
  const results: BenchResults = {
    startedAt: started.toISOString(),
    minutes: 0,
    scale: SCALE,
    scenarios: [...selected],
    machine: {
      cpu: os.cpus()[0]?.model ?? 'unknown',
      cores: os.cpus().length,
      memoryGiB: round(os.totalmem() / 1024 ** 3),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
    },
    config: {
      workflowBundle: BUNDLE,
      KEEL_CONVERSATION_IDLE_MS: IDLE_MS,
      ...Object.fromEntries(WORKER_SETTINGS.map((k) => [k, process.env[k] ?? 'default'])),
    },
    secondsPerScenario: {},
    errors: {},
    memoryAtStart: { workerMiB: 0, apiMiB: 0 },
  };
  /** A scenario that fails is reported as failed; the others still run (a full run takes half an hour). */
  const run = async <T>(name: Scenario | 'shape' | 'pg noise', f: () => Promise<T>): Promise<T | undefined> => {
    const t0 = Date.now();
    console.log(`bench: ${name}…`);
    try {
      return await f();
    } catch (err) {
      console.error(`bench: ${name} failed:`, err);
      results.errors[name] = err instanceof Error ? err.message : String(err);
      return undefined;
    } finally {
      results.secondsPerScenario[name] = round((Date.now() - t0) / 1000);
    }
  };
  const wants = (s: Scenario) => selected.includes(s);
  try {
    const pids = { worker: stack.worker().pid!, api: stack.apiProcess().pid!, floor: benchWorker.pid! };
    results.memoryAtStart = { workerMiB: round(await rssMiB(pids.worker)), apiMiB: round(await rssMiB(pids.api)) };
    const none: PgCounters = { commits: 0, writeTransactions: 0, rows: 0, walBytes: 0 };
    const noise = wants('costs') || wants('burst') ? ((await run('pg noise', () => pgNoise(db))) ?? none) : none;
    let shape: TurnShape | undefined;
    if (wants('overhead') || wants('throughput'))
      shape = results.shape = await run('shape', () => keelTurnShape(stack, client));
    const perTurn = shape?.activitiesPerTurn ?? 2;

    if (wants('heap')) {
      const code = bundle ? await readFile(bundle, 'utf8') : await bundleWorkflows();
      results.heap = await run('heap', () => workflowHeap(stack.temporalAddress, code));
      console.log(`bench: workflow heap ${JSON.stringify(results.heap)}`);
    }
    if (wants('overhead')) {
      results.overhead = await run('overhead', () => turnOverhead(stack, client, n(200), perTurn));
      const o = results.overhead;
      console.log(`bench: turn overhead p50 ${JSON.stringify({ keel: o?.keel.p50Ms, floor: o?.floor.p50Ms })}`);
    }
    if (wants('sealed')) {
      results.sealed = await run('sealed', async () => {
        const clear = await startKeelStack({
          logFile,
          env: { KEEL_PAYLOAD_ENCRYPTION: 'off', KEEL_CONVERSATION_IDLE_MS: IDLE_MS, ...bundleEnv },
        });
        try {
          return await sealedOverhead(stack, clear, n(100));
        } finally {
          await clear.stop();
        }
      });
      const e = results.sealed;
      console.log(`bench: sealed turn p50 ${JSON.stringify({ sealed: e?.sealed.p50Ms, clear: e?.clear.p50Ms })}`);
    }
    if (wants('history')) {
      results.history = await run('history', () => historyGrowth(stack, client, n(200)));
      const h = results.history;
      const perTurnBytes = { keel: h?.keel.bytesPerTurn.overall, minimal: h?.minimal.bytesPerTurn.overall };
      console.log(`bench: bytes per turn ${JSON.stringify(perTurnBytes)}`);
    }
    if (wants('throughput')) {
      results.throughput = await run('throughput', () => throughputRun(stack, client, pids, n(100), 5, perTurn));
      const t = results.throughput;
      console.log(
        `bench: throughput ${JSON.stringify({ keel: t?.keel.turnsPerSecond, floor: t?.floor.turnsPerSecond })}`,
      );
    }
    if (wants('costs')) {
      const o = { conversations: n(20), turnsEach: 5, delegates: n(10), routineRuns: n(5) };
      results.costs = await run('costs', () => costsRun(stack, client, db, noise, o));
    }
    if (wants('burst')) {
      results.burst = await run('burst', () => burstRun(stack, client, db, noise, n(200)));
      console.log(
        `bench: burst ${JSON.stringify({ keel: results.burst?.keel.delayMs, floor: results.burst?.floor.delayMs })}`,
      );
    }
    if (wants('idle')) {
      const idleMs = Number(IDLE_MS);
      results.idle = await run('idle', () =>
        idleConversations(stack, client, pids, {
          conversations: n(10_000),
          checkpoint: n(1_000),
          concurrency: Number(process.env.BENCH_IDLE_CONCURRENCY ?? 10),
          idleMs,
          graceMs: Number(process.env.BENCH_IDLE_GRACE_MS ?? 120_000),
          // A worker that keeps every conversation would fill the machine: it is stopped at 40% of RAM, or 8 GiB.
          maxWorkerMiB: Math.min(8192, (0.4 * os.totalmem()) / 1024 ** 2),
          woken: Math.max(5, n(30)),
          workerMetrics: `http://127.0.0.1:${metricsPort}/metrics`,
        }),
      );
    }
    results.minutes = round((Date.now() - started.getTime()) / 60_000);
    await mkdir(out, { recursive: true });
    await writeReport(results, out);
    console.log(`bench: wrote ${path.join(out, 'results.json')} and REPORT.md in ${results.minutes} minutes`);
  } finally {
    await db.end();
    await connection.close();
    await stopProcess(benchWorker);
    await stack.stop();
    await rm(workDir, { recursive: true, force: true });
  }
}

// `npm run bench -- --cluster` measures the production topology instead (bench/cluster.ts), `-- --spend` what spend
// control adds to a turn (bench/spend.ts).
(process.argv.includes('--cluster') ? clusterBench() : process.argv.includes('--spend') ? spendBench() : main()).then(
  () => process.exit(0),
  (err: unknown) => {
    console.error('bench failed:', err);
    process.exit(1);
  },
);
