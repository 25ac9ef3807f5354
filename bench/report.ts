import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { historyGrowth, openConversations, schedulesRun, throughputRun, turnOverhead } from './scenarios';

export interface BenchResults {
  startedAt: string;
  scale: number;
  machine: { cpu: string; cores: number; memoryGiB: number; node: string; platform: string };
  history: Awaited<ReturnType<typeof historyGrowth>>;
  overhead: Awaited<ReturnType<typeof turnOverhead>>;
  throughput: Omit<Awaited<ReturnType<typeof throughputRun>>, 'memory'>;
  schedules: Awaited<ReturnType<typeof schedulesRun>>;
  memory: {
    idle: { workerMiB: number; apiMiB: number };
    concurrent: { workerMiB: number; apiMiB: number };
    atRest: Awaited<ReturnType<typeof openConversations>>;
  };
}

interface Goal {
  name: string;
  goal: string;
  measured: string;
  met: boolean;
}

/** The issue's goals, judged from the figures. */
export function goals(r: BenchResults): Goal[] {
  const h = r.history;
  const kib = (b: number) => `${(b / 1024).toFixed(1)} KiB`;
  return [
    {
      name: 'history: flat bytes per turn',
      goal: 'Keel bytes per turn constant within 10% from turn 10 to the last',
      measured:
        `${h.keel.bytesPerTurn.at10} / ${h.keel.bytesPerTurn.at100} / ${h.keel.bytesPerTurn.atLast} B ` +
        `(turns 10, 100, ${h.turns}): spread ${(h.keel.spread * 100).toFixed(1)}%`,
      met: h.keel.spread <= 0.1,
    },
    {
      name: 'history: against transcript-in-history',
      goal: "Keel's bytes per turn at turn 100 ≤ 1/20 of the baseline's",
      measured:
        `${kib(h.keel.bytesPerTurn.at100)} vs ${kib(h.baseline.bytesPerTurn.at100)}: ` +
        `1/${(1 / h.ratioAt100).toFixed(1)}`,
      met: h.ratioAt100 <= 1 / 20,
    },
    {
      name: 'turn overhead',
      goal: 'Keel p50 ≤ 1.5× the bare floor',
      measured: `${r.overhead.keel.p50Ms} ms vs ${r.overhead.floor.p50Ms} ms: ${r.overhead.ratioP50}×`,
      met: r.overhead.ratioP50 <= 1.5,
    },
    {
      name: 'throughput',
      goal: '≥ 0.7× the floor’s turns per second',
      measured:
        `${r.throughput.keel.turnsPerSecond} vs ${r.throughput.floor.turnsPerSecond} turns/s: ` +
        `${r.throughput.ratio}×`,
      met: r.throughput.ratio >= 0.7,
    },
  ];
}

export async function writeReport(r: BenchResults, dir: string): Promise<void> {
  const g = goals(r);
  await writeFile(path.join(dir, 'results.json'), `${JSON.stringify({ ...r, goals: g }, null, 2)}\n`);
  const h = r.history;
  const o = r.overhead;
  const t = r.throughput;
  const s = r.schedules;
  const m = r.memory;
  const row = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;
  const breakdown = (b: typeof o.keel.breakdownPerTurn) =>
    [
      `workflow task queue ${b.workflowTaskQueueMs} ms`,
      `workflow task run ${b.workflowTaskRunMs} ms`,
      `activity queue ${b.activityQueueMs} ms`,
      ...Object.entries(b.activityRunMs).map(([k, v]) => `${k} ${v} ms`),
    ].join(', ');
  const lines = [
    '# Keel benchmarks',
    '',
    `Run ${r.startedAt} by \`npm run bench\`${r.scale !== 1 ? ` at scale ${r.scale}` : ''}, ` +
      `on ${r.machine.cores} × ${r.machine.cpu}, ${r.machine.memoryGiB} GiB, ` +
      `Node ${r.machine.node}, ${r.machine.platform}.`,
    'One Temporal dev server (SQLite) and one embedded PostgreSQL for everything; the scripted model at zero delay;',
    "Keel's worker and API and the comparison workflows' worker each in a process of their own. Every figure, with its",
    'baseline, is in `results.json`.',
    '',
    '## Goals',
    '',
    row(['goal', 'measured', 'met']),
    row(['---', '---', '---']),
    ...g.map((x) => row([x.goal, x.measured, x.met ? 'yes' : '**no**'])),
    '',
    '## History growth',
    '',
    `Each turn is one ${h.messageBytes}-byte user message and its reply. ` +
      'The baseline passes the whole transcript into each model activity.',
    '',
    row(['turn', 'Keel bytes', 'Keel events', 'Keel runs', 'baseline bytes', 'baseline events']),
    row(['---:', '---:', '---:', '---:', '---:', '---:']),
    ...h.keel.at.map((k) => {
      const b = h.baseline.at.find((x) => x.turn === k.turn);
      return row([k.turn, k.bytes, k.events, k.runs, b?.bytes ?? '', b?.events ?? '']);
    }),
    '',
    row(['bytes added per turn', 'around turn 10', 'around turn 100', `around turn ${h.turns}`]),
    row(['---', '---:', '---:', '---:']),
    row(['Keel', h.keel.bytesPerTurn.at10, h.keel.bytesPerTurn.at100, h.keel.bytesPerTurn.atLast]),
    row(['baseline', h.baseline.bytesPerTurn.at10, h.baseline.bytesPerTurn.at100, h.baseline.bytesPerTurn.atLast]),
    '',
    `The baseline's history would cross Temporal's 50 MiB limit at turn ${h.baseline.crosses50MiBAtTurn ?? 'never'} ` +
      '(its bytes per turn grow with the transcript: fitted from the measured slopes). ' +
      "Keel's conversation continues as new when Temporal suggests it, so no run grows without bound. " +
      "Keel's bytes per turn are 1/20 of the baseline's " +
      `from turn ${h.baseline.keelAtOneTwentiethFromTurn ?? '–'} on.`,
    '',
    ...(h.baseline.endedByTemporal
      ? [
          `The baseline did not reach turn ${h.turns}: ` +
            `Temporal ended it (${h.baseline.endedByTemporal.status}) at turn ${h.baseline.endedByTemporal.turn}: ` +
            `${h.baseline.endedByTemporal.reason}`,
          '',
        ]
      : []),
    "Where Keel's bytes per turn go (its latest run's history by event type, divided by that run's turns):",
    '',
    row(['event', 'bytes per turn']),
    row(['---', '---:']),
    ...Object.entries(h.keel.bytesPerTurnByEvent).map(([k, v]) => row([k, v])),
    '',
    '## Turn overhead',
    '',
    `Submit → reply recorded over ${o.turns} sequential turns. ` +
      "Keel is timed from the POST to the conversation's `turn.finished` event (SSE), " +
      "published right after the turn's end is committed; " +
      `the floor is an update that runs ${o.activitiesPerTurn} empty activities (Keel's count per turn) in a row. ` +
      "Keel's turns and the floor's alternate, so both see the same machine.",
    '',
    row(['', 'p50 ms', 'p95 ms', 'mean ms']),
    row(['---', '---:', '---:', '---:']),
    row(['Keel', o.keel.p50Ms, o.keel.p95Ms, o.keel.meanMs]),
    row(['bare floor', o.floor.p50Ms, o.floor.p95Ms, o.floor.meanMs]),
    '',
    'Where a turn’s time goes (per turn, from the histories’ timestamps):',
    '',
    `- Keel: ${breakdown(o.keel.breakdownPerTurn)}`,
    `- floor: ${breakdown(o.floor.breakdownPerTurn)}`,
    '',
    '## Throughput',
    '',
    `${t.conversations} conversations × ${t.turnsEach} turns, all at once ` +
      '(Keel through its API with `wait`; the floor through update-with-start).',
    '',
    row(['', 'seconds', 'turns/s', 'worker CPU s/turn', 'API CPU s/turn']),
    row(['---', '---:', '---:', '---:', '---:']),
    row(['Keel', t.keel.seconds, t.keel.turnsPerSecond, t.keel.workerCpuSecondsPerTurn, t.keel.apiCpuSecondsPerTurn]),
    row(['bare floor', t.floor.seconds, t.floor.turnsPerSecond, t.floor.workerCpuSecondsPerTurn, '–']),
    '',
    '## Schedules',
    '',
    `${s.jobs} jobs due at the same instant (\`at\` schedules), each delivering to a local webhook.`,
    '',
    row(['delay to run start p50', 'p99', 'max', 'all delivered after', 'mean run', 'one slot (Phantom) would take']),
    row(['---:', '---:', '---:', '---:', '---:', '---:']),
    row([
      `${s.delayMs.p50} ms`,
      `${s.delayMs.p99} ms`,
      `${s.delayMs.max} ms`,
      `${s.allDeliveredAfterMs} ms`,
      `${s.meanRunMs} ms`,
      `${s.oneSlotAllDoneMs} ms`,
    ]),
    '',
    '## Memory',
    '',
    row(['resident MiB', 'worker', 'API']),
    row(['---', '---:', '---:']),
    row(['idle', m.idle.workerMiB, m.idle.apiMiB]),
    row([`${t.conversations} concurrent conversations (peak)`, m.concurrent.workerMiB, m.concurrent.apiMiB]),
    row([`${m.atRest.conversations} open conversations at rest`, m.atRest.workerMiB, m.atRest.apiMiB]),
    '',
  ];
  await writeFile(path.join(dir, 'REPORT.md'), lines.join('\n'));
}
