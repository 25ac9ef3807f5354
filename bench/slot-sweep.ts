/**
 * The worker's slots and cache, swept (issue 27): `npm run bench`'s throughput and burst scenarios once per setting,
 * each on a fresh stack, with the worker's KEEL_WORKER_* variables set as a user would set them. Writes
 * bench/SLOTS.md and bench/slots-results.json.
 *
 *   npx tsx bench/slot-sweep.ts [--only name,name]
 *
 * A setting's figures are ratios to the floors measured in the same run, so settings compare across runs.
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT, spawnTs } from '../scripts/processes';
import type { BenchResults } from './report';

const { values: args } = parseArgs({ options: { only: { type: 'string', default: '' } } });

/** The settings swept: the default, fewer and more slots, a bigger cache, and the SDK's resource-based tuner. */
const SETTINGS: { name: string; env: Record<string, string> }[] = [
  { name: 'default (cache 100, 40 / 100 / 100 slots)', env: {} },
  { name: 'workflow task slots 10', env: { KEEL_WORKER_WORKFLOW_TASK_SLOTS: '10' } },
  {
    name: 'workflow task slots 100, local activity slots 200',
    env: { KEEL_WORKER_WORKFLOW_TASK_SLOTS: '100', KEEL_WORKER_LOCAL_ACTIVITY_SLOTS: '200' },
  },
  { name: 'cache 250', env: { KEEL_WORKER_CACHED_WORKFLOWS: '250' } },
  { name: 'resource-based tuner, CPU 0.8, memory 0.8', env: { KEEL_WORKER_TUNER: 'resource:0.8,0.8' } },
];

interface SweepRow {
  name: string;
  env: Record<string, string>;
  turnsPerSecondRatio?: number;
  cpuPerTurnRatio?: number;
  workerPeakMiB?: number;
  burstLastDeliveryMs?: number;
  floorLastStartMs?: number;
  burstRatio?: number;
  error?: string;
}

async function runOne(env: Record<string, string>): Promise<BenchResults> {
  const out = await mkdtemp(path.join(os.tmpdir(), 'keel-sweep-'));
  const child = spawnTs('bench/run.ts', { ...process.env, ...env, BENCH_ONLY: 'throughput,burst', BENCH_OUT: out });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`bench/run.ts exited ${code}`);
  return JSON.parse(await readFile(path.join(out, 'results.json'), 'utf8')) as BenchResults;
}

function rowOf(name: string, env: Record<string, string>, r: BenchResults): SweepRow {
  const t = r.throughput;
  const b = r.burst;
  const ratio = (a: number, f: number) => Math.round((a / f) * 100) / 100;
  return {
    name,
    env,
    ...(t
      ? {
          turnsPerSecondRatio: t.ratio,
          cpuPerTurnRatio: ratio(t.keel.workerCpuSecondsPerTurn, t.floor.workerCpuSecondsPerTurn),
          workerPeakMiB: t.memory.workerMiB,
        }
      : {}),
    ...(b
      ? {
          burstLastDeliveryMs: b.keel.allDeliveredAfterMs,
          floorLastStartMs: b.floor.delayMs.max,
          burstRatio: ratio(b.keel.allDeliveredAfterMs, b.floor.delayMs.max),
        }
      : {}),
  };
}

function report(rows: SweepRow[], started: Date): string {
  const cell = (v: number | undefined, unit = '') => (v === undefined ? '–' : `${v}${unit}`);
  return [
    '# The worker’s slots, swept',
    '',
    `Run ${started.toISOString()} by \`npx tsx bench/slot-sweep.ts\`, on ${os.cpus().length} × ` +
      `${os.cpus()[0]?.model ?? 'CPU'}: \`npm run bench\`'s throughput (100 conversations × 5 turns) and burst ` +
      '(200 jobs due at once) scenarios, once per setting, each on a fresh stack. Ratios are to the floors measured ' +
      'in the same run (goals: turns/s ≥ 0.9×, CPU per turn ≤ 1.5×, last delivery ≤ 1.25× the floor’s last start).',
    '',
    '| setting | turns/s vs floor | worker CPU/turn vs floor | worker peak MiB | last delivery | floor last start ' +
      '| last delivery vs floor |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map((r) =>
      r.error
        ? `| ${r.name} | failed: ${r.error} | | | | | |`
        : `| ${r.name} | ${cell(r.turnsPerSecondRatio, '×')} | ${cell(r.cpuPerTurnRatio, '×')} | ` +
          `${cell(r.workerPeakMiB)} | ${cell(r.burstLastDeliveryMs, ' ms')} | ${cell(r.floorLastStartMs, ' ms')} | ` +
          `${cell(r.burstRatio, '×')} |`,
    ),
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const started = new Date();
  const only = args.only.split(',').filter(Boolean);
  const rows: SweepRow[] = [];
  for (const [i, s] of SETTINGS.entries()) {
    if (only.length > 0 && !only.includes(String(i))) continue;
    console.log(`sweep: ${s.name}`);
    try {
      rows.push(rowOf(s.name, s.env, await runOne(s.env)));
    } catch (err) {
      rows.push({ name: s.name, env: s.env, error: err instanceof Error ? err.message : String(err) });
    }
    console.log(`sweep: ${JSON.stringify(rows.at(-1))}`);
  }
  await writeFile(path.join(REPO_ROOT, 'bench', 'slots-results.json'), JSON.stringify(rows, null, 2) + '\n');
  await writeFile(path.join(REPO_ROOT, 'bench', 'SLOTS.md'), report(rows, started));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
