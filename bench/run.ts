/**
 * `npm run bench`: Keel's costs measured side by side with the designs it is compared against, in one run on one
 * Temporal dev server and one PostgreSQL, with the scripted model at zero delay, so the figures are ratios that
 * survive a noisy machine. Writes bench/results.json (every figure) and bench/REPORT.md (tables and goals).
 *
 *   history growth   Keel's conversation against a transcript-in-history workflow, turns 1 … 500
 *   turn overhead    submit → reply recorded over 200 sequential turns, against a bare chain of empty activities
 *   throughput       100 concurrent conversations × 5 turns, against the bare floor at the same concurrency
 *   schedules        200 jobs due in the same minute
 *   memory           worker and API resident memory: idle, 100 concurrent conversations, 1,000 at rest
 *
 * BENCH_SCALE (default 1) multiplies the counts down for a quick try (e.g. 0.1); the report says which scale ran.
 */
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { rssMiB, startKeelStack } from '../scripts/keel-stack';
import { REPO_ROOT, spawnTs, stopProcess } from '../scripts/processes';
import { round } from './measure';
import { writeReport } from './report';
import { BENCH_QUEUE, historyGrowth, openConversations, schedulesRun, throughputRun, turnOverhead } from './scenarios';

const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const n = (full: number) => Math.max(2, Math.round(full * SCALE));

async function main(): Promise<void> {
  const started = new Date();
  const logFile = path.join(os.tmpdir(), `keel-bench-${process.pid}.log`);
  console.log(`bench: scale ${SCALE}; Keel's logs in ${logFile}`);
  const stack = await startKeelStack({ logFile, env: { KEEL_JOB_CATCHUP_WINDOW_MS: '600000' } });
  const benchWorker = spawnTs(
    'bench/worker.ts',
    { ...process.env, TEMPORAL_ADDRESS: stack.temporalAddress, BENCH_TASK_QUEUE: BENCH_QUEUE },
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
  const client = new Client({ connection });
  const db = new pg.Pool({ connectionString: stack.databaseUrl, max: 4 });
  try {
    const pids = { worker: stack.worker().pid!, api: stack.apiProcess().pid!, floor: benchWorker.pid! };
    const idle = { workerMiB: round(await rssMiB(pids.worker)), apiMiB: round(await rssMiB(pids.api)) };
    console.log(`bench: idle memory ${JSON.stringify(idle)}`);

    const overhead = await turnOverhead(stack, client, n(200));
    console.log(`bench: turn overhead ${JSON.stringify({ keel: overhead.keel.p50Ms, floor: overhead.floor.p50Ms })}`);
    const history = await historyGrowth(stack, client, n(500));
    console.log(`bench: history at the last turn ${JSON.stringify(history.keel.at[history.keel.at.length - 1])}`);
    const throughput = await throughputRun(stack, client, pids, n(100), 5, overhead.activitiesPerTurn);
    const turnsPerSecond = { keel: throughput.keel.turnsPerSecond, floor: throughput.floor.turnsPerSecond };
    console.log(`bench: throughput ${JSON.stringify(turnsPerSecond)}`);
    const atRest = await openConversations(stack, pids, n(1000));
    const schedules = await schedulesRun(stack, client, db, n(200));
    console.log(`bench: schedules ${JSON.stringify(schedules.delayMs)}`);

    const results = {
      startedAt: started.toISOString(),
      scale: SCALE,
      machine: {
        cpu: os.cpus()[0]?.model ?? 'unknown',
        cores: os.cpus().length,
        memoryGiB: round(os.totalmem() / 1024 ** 3),
        node: process.version,
        platform: `${os.platform()} ${os.release()}`,
      },
      history,
      overhead,
      throughput: {
        conversations: throughput.conversations,
        turnsEach: throughput.turnsEach,
        keel: throughput.keel,
        floor: throughput.floor,
        ratio: throughput.ratio,
      },
      schedules,
      memory: { idle, concurrent: throughput.memory, atRest },
    };
    await writeReport(results, path.join(REPO_ROOT, 'bench'));
    console.log('bench: wrote bench/results.json and bench/REPORT.md');
  } finally {
    await db.end();
    await connection.close();
    await stopProcess(benchWorker);
    await stack.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error('bench failed:', err);
    process.exit(1);
  },
);
