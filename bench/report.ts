import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { REPO_ROOT } from '../scripts/processes';
import type { ActionsPer, PgPer } from './actions';
import type { burstRun } from './burst';
import type { sealedOverhead } from './sealed';
import type { costsRun } from './costs';
import type { idleConversations } from './idle';
import type { workflowHeap } from './workflow-heap';
import type { BreakdownPerTurn } from './measure';
import type { historyGrowth, throughputRun, TurnShape, turnOverhead } from './scenarios';

type Result<F extends (...args: never[]) => Promise<unknown>> = Awaited<ReturnType<F>>;

export interface BenchResults {
  startedAt: string;
  minutes: number;
  scale: number;
  /** The scenarios run (BENCH_ONLY), or every one. */
  scenarios: string[];
  machine: { cpu: string; cores: number; memoryGiB: number; node: string; platform: string };
  /** Keel's settings for the run (KEEL_CONVERSATION_IDLE_MS and the worker's capacity). */
  config: Record<string, string>;
  secondsPerScenario: Record<string, number>;
  errors: Record<string, string>;
  memoryAtStart: { workerMiB: number; apiMiB: number };
  shape?: TurnShape;
  heap?: Result<typeof workflowHeap>;
  overhead?: Result<typeof turnOverhead>;
  sealed?: Result<typeof sealedOverhead>;
  history?: Result<typeof historyGrowth>;
  throughput?: Result<typeof throughputRun>;
  costs?: Result<typeof costsRun>;
  burst?: Result<typeof burstRun>;
  idle?: Result<typeof idleConversations>;
}

interface Goal {
  name: string;
  goal: string;
  measured: string;
  /** null: not measured (a figure needs more turns than a small-scale run has). */
  met: boolean | null;
  /** Where the time, bytes or memory go: shown when the goal is missed. */
  breakdown: string[];
}

/** A figure judged against its goal, or null when the run did not measure it (NaN). */
const judged = (x: number, ok: (x: number) => boolean) => (Number.isNaN(x) ? null : ok(x));
const kib = (b: number) => `${(b / 1024).toFixed(1)} KiB`;
const n = (x: number) => x.toLocaleString('en-US');

/** A per-turn time breakdown in one line. */
export function breakdownLine(b: BreakdownPerTurn): string {
  const local = Object.entries(b.localActivities);
  return [
    `workflow task queue ${b.workflowTaskQueueMs} ms`,
    `workflow task run ${b.workflowTaskRunMs} ms${local.length ? ' (local activities included)' : ''}`,
    `activity queue ${b.activityQueueMs} ms`,
    ...Object.entries(b.activityRunMs).map(([k, v]) => `${k} ${v} ms`),
    ...(local.length ? [`local activities: ${local.map(([k, v]) => `${k} ×${v}`).join(', ')}`] : []),
  ].join(', ');
}

/** The largest entries of a per-event-type byte breakdown. */
const topBytes = (r: Record<string, number>, count = 10) =>
  Object.entries(r)
    .slice(0, count)
    .map(([k, v]) => `${k} ${v} B`)
    .join(', ');

function idleGoals(i: NonNullable<BenchResults['idle']>): Goal[] {
  const memory = (label: string, s: typeof i.atEnd | null) =>
    s
      ? `${label} (${n(s.conversations)} conversations): worker ${s.worker.rssMiB} MiB resident ` +
        `(${s.worker.anonMiB} anonymous, ${s.worker.fileMiB} file-backed), API ${s.api.rssMiB} MiB; ` +
        `${n(s.runningConversations)} conversation workflows running` +
        (s.stickyCache !== null ? `, ${n(s.stickyCache)} workflows in the worker's cache` : '')
      : `${label}: not reached`;
  const memoryLines = [
    memory('at the checkpoint', i.atCheckpoint),
    memory('after the last', i.atEnd),
    memory('after idling', i.afterIdle),
    `peak while generating: worker ${i.peak.workerMiB} MiB, API ${i.peak.apiMiB} MiB`,
    ...(i.stoppedEarly
      ? [
          `generation stopped at ${n(i.stoppedEarly.at)} conversations (${i.stoppedEarly.reason}; ` +
            `worker ${i.stoppedEarly.workerMiB} MiB)`,
        ]
      : []),
  ];
  const complete = !i.stoppedEarly && i.generated === i.conversations;
  const flat = i.atCheckpoint ? i.atEnd.worker.rssMiB / i.atCheckpoint.worker.rssMiB : NaN;
  const w = i.firstTurnAfterIdle;
  return [
    {
      name: 'idle memory',
      goal: `worker resident memory ≤ 400 MiB at ${n(i.conversations)} one-turn conversations`,
      measured: `${i.atEnd.worker.rssMiB} MiB at ${n(i.generated)}`,
      met: complete && i.atEnd.worker.rssMiB <= 400,
      breakdown: memoryLines,
    },
    {
      name: 'idle memory flat',
      goal: `worker memory flat: at ${n(i.conversations)} ≤ 1.1× at ${n(i.atCheckpoint?.conversations ?? 0)}`,
      measured: `${i.atEnd.worker.rssMiB} vs ${i.atCheckpoint?.worker.rssMiB ?? '–'} MiB: ${flat.toFixed(2)}×`,
      met: complete && flat <= 1.1,
      breakdown: memoryLines,
    },
    {
      name: 'idle closes',
      goal: `no conversation workflow running once idle (${i.idleMs / 1000} s without work)`,
      measured: `${n(i.idling.running)} running ${i.idling.waitedSeconds} s after the last turn`,
      met: i.idling.closed,
      breakdown: [
        `running conversation workflows after the last turn: ${n(i.idling.runningAtEnd)}; then ` +
          i.idling.counts.map((c) => `${n(c.running)} at ${c.afterS} s`).join(', '),
      ],
    },
    {
      name: 'first turn after idle',
      goal: "first turn of an idle conversation p50 ≤ 1.5× a warm turn's p50",
      measured: `${w.woken.p50Ms} ms vs ${w.warm.p50Ms} ms: ${w.ratioP50}× (${w.fromClosed}/${w.conversations} closed)`,
      met: w.ratioP50 <= 1.5,
      breakdown: [
        `${w.fromClosed} of ${w.conversations} idle conversations had a closed workflow when woken`,
        `woken turn: ${breakdownLine(w.woken.breakdownPerTurn)}`,
        `warm turn: ${breakdownLine(w.warm.breakdownPerTurn)}`,
        'POST → the run started and the API’s own part are outside the histories: the rest of the difference.',
      ],
    },
  ];
}

/** Where a job run's time goes: its own history, and its turn's in the job's conversation when it ran there. */
function jobRunLines(k: NonNullable<BenchResults['burst']>['keel']): string[] {
  const { run, turn } = k.breakdownPerRun;
  // From issue 27 a run runs its turn in its own workflow: the job's conversation has no workflow of its own then.
  if (turn.workflowTaskRunMs === 0) return [`a job run's history (its turn included), per run: ${breakdownLine(run)}`];
  return [
    `a job run's own history, per run: ${breakdownLine(run)}`,
    `its turn, in the job's conversation, per run: ${breakdownLine(turn)}`,
  ];
}

/** Temporal's part of a job run alone (runs before it had none measured). */
function footprintLines(b: NonNullable<BenchResults['burst']>): string[] {
  const f = b.footprint;
  if (!f) return [];
  const d = b.durable;
  return [
    ...(d?.allDeliveredAfterMs
      ? [
          "The least a durable run does, with nothing of Keel's (the footprint's workflow whose one local step " +
            "claims the run, commits an answer with its delivery's ledger row, POSTs it to a webhook and books the " +
            `run: three statements and one request): last delivery ${(d.allDeliveredAfterMs / 1000).toFixed(1)} s: ` +
            `${(d.allDeliveredAfterMs / Math.max(1, b.floor.delayMs.max)).toFixed(2)}× the floor's last start`,
        ]
      : []),
    "Temporal's part of a Keel job run alone (a job run's search attributes and memo, one empty local step, its " +
      `outcome upserted): last start ${(f.delayMs.max / 1000).toFixed(1)} s, last closed ` +
      `${(f.lastClosedMs / 1000).toFixed(1)} s: ${(f.lastClosedMs / Math.max(1, b.floor.delayMs.max)).toFixed(2)}× ` +
      "the floor's last start",
  ];
}

function burstGoals(b: NonNullable<BenchResults['burst']>): Goal[] {
  const k = b.keel;
  const lines = [
    `fire → start p50 / p99 / max: Keel ${k.delayMs.p50} / ${k.delayMs.p99} / ${k.delayMs.max} ms, ` +
      `floor ${b.floor.delayMs.p50} / ${b.floor.delayMs.p99} / ${b.floor.delayMs.max} ms`,
    ...jobRunLines(k),
    ...footprintLines(b),
    `mean run (fired → booked, from job_runs) ${k.meanRunMs} ms`,
    ...(k.createdLateByMs || b.floor.createdLateByMs
      ? [`schedules created late by: Keel ${k.createdLateByMs} ms, floor ${b.floor.createdLateByMs} ms`]
      : []),
  ];
  return [
    {
      name: 'burst start',
      goal: `${b.jobs} jobs due at once: Keel's fire → run start p99 ≤ 2× the floor's (bare Schedules)`,
      measured: `${k.delayMs.p99} ms vs ${b.floor.delayMs.p99} ms: ${b.ratioP99}×`,
      met: b.ratioP99 <= 2,
      breakdown: lines,
    },
    {
      name: 'burst delivered',
      goal: `${b.jobs} simultaneous fires: last delivery ≤ 1.25× the floor's last start`,
      measured:
        `${(k.allDeliveredAfterMs / 1000).toFixed(1)} s vs ${(b.floor.delayMs.max / 1000).toFixed(1)} s: ` +
        `${(k.allDeliveredAfterMs / Math.max(1, b.floor.delayMs.max)).toFixed(2)}×`,
      met: k.allDeliveredAfterMs <= 1.25 * b.floor.delayMs.max,
      breakdown: lines,
    },
    {
      name: 'schedule floor',
      goal: `${b.jobs} bare Schedules on the dev server: fire to last start ≤ 15 s, by configuration`,
      measured: `${(b.floor.delayMs.max / 1000).toFixed(1)} s`,
      met: b.floor.delayMs.max <= 15_000,
      breakdown: [`floor fire → start p50 / p99 / max: ${spreadLine(b.floor.delayMs)} ms`],
    },
  ];
}

const spreadLine = (d: { p50: number; p99: number; max: number }) => `${d.p50} / ${d.p99} / ${d.max}`;

/** The issue's goals (primary) and the earlier ones kept as secondary figures, judged from what ran. */
export function goals(r: BenchResults): { primary: Goal[]; secondary: Goal[] } {
  const primary: Goal[] = [];
  const secondary: Goal[] = [];
  if (r.idle) primary.push(...idleGoals(r.idle));
  if (r.burst) primary.push(...burstGoals(r.burst));
  const t = r.throughput;
  if (t)
    primary.push({
      name: 'throughput',
      goal: `≥ 0.9× the floor’s turns per second (${t.conversations} conversations × ${t.turnsEach} turns)`,
      measured: `${t.keel.turnsPerSecond} vs ${t.floor.turnsPerSecond} turns/s: ${t.ratio}×`,
      met: t.ratio >= 0.9,
      breakdown: [
        `Keel, per turn under load: ${breakdownLine(t.keel.breakdownPerTurn)}`,
        `floor, per turn under load: ${breakdownLine(t.floor.breakdownPerTurn)}`,
        `CPU per turn: Keel worker ${t.keel.workerCpuSecondsPerTurn} s + API ${t.keel.apiCpuSecondsPerTurn} s, ` +
          `floor worker ${t.floor.workerCpuSecondsPerTurn} s`,
      ],
    });
  if (t) {
    const cpu = t.keel.workerCpuSecondsPerTurn / Math.max(1e-9, t.floor.workerCpuSecondsPerTurn);
    primary.push({
      name: 'CPU per turn',
      goal: `worker CPU-s per turn ≤ 1.5× the floor's (${t.conversations} concurrent conversations)`,
      measured: `${t.keel.workerCpuSecondsPerTurn} vs ${t.floor.workerCpuSecondsPerTurn} s: ${cpu.toFixed(2)}×`,
      met: cpu <= 1.5,
      breakdown: [`Keel, per turn under load: ${breakdownLine(t.keel.breakdownPerTurn)}`],
    });
  }
  const turnCosts = r.costs && !('error' in r.costs.turn) ? r.costs.turn : undefined;
  if (turnCosts)
    primary.push({
      name: 'actions per turn',
      goal: 'Temporal Cloud actions per turn ≤ 4',
      measured: `${turnCosts.actionsPerTurn.total}`,
      met: turnCosts.actionsPerTurn.total <= 4,
      breakdown: [`by kind: ${kinds(turnCosts.actionsPerTurn)}`],
    });
  if (r.burst)
    primary.push({
      name: 'actions per job run',
      goal: "Temporal Cloud actions per job run (its turn and the Schedule's fire included) ≤ 10",
      measured: `${r.burst.keel.actionsPerRun.total}`,
      met: r.burst.keel.actionsPerRun.total <= 10,
      breakdown: [`by kind: ${kinds(r.burst.keel.actionsPerRun)}`],
    });
  const h = r.history;
  if (h) {
    primary.push({
      name: 'bytes per turn',
      goal: "Keel's history bytes per turn ≤ 2× the minimal turn's (an Update running one empty activity)",
      measured:
        `${h.keel.bytesPerTurn.overall} vs ${h.minimal.bytesPerTurn.overall} B (turns 1 → ${h.turns}): ` +
        `${h.ratioToMinimal}×`,
      met: judged(h.ratioToMinimal, (x) => x <= 2),
      breakdown: [
        `Keel per turn: ${topBytes(h.keel.bytesPerTurnByEvent)}`,
        `minimal turn: ${topBytes(h.minimal.bytesPerTurnByEvent)}`,
      ],
    });
    secondary.push(
      {
        name: 'history: flat bytes per turn',
        goal: 'Keel bytes per turn constant within 10% from turn 10 to the last',
        measured:
          `${h.keel.bytesPerTurn.at10} / ${h.keel.bytesPerTurn.at100} / ${h.keel.bytesPerTurn.atLast} B ` +
          `(turns 10, 100, ${h.turns}): spread ${(h.keel.spread * 100).toFixed(1)}%`,
        met: judged(h.keel.spread, (x) => x <= 0.1),
        breakdown: [`Keel per turn: ${topBytes(h.keel.bytesPerTurnByEvent)}`],
      },
      {
        name: 'history: against transcript-in-history',
        goal: "Keel's bytes per turn at turn 100 ≤ 1/20 of the baseline's",
        measured:
          `${kib(h.keel.bytesPerTurn.at100)} vs ${kib(h.baseline.bytesPerTurn.at100)}: ` +
          `1/${(1 / h.ratioAt100).toFixed(1)}`,
        met: judged(h.ratioAt100, (x) => x <= 1 / 20),
        breakdown: [
          `the baseline's bytes per turn grow with its transcript: 1/20 from turn ` +
            `${h.baseline.keelAtOneTwentiethFromTurn ?? '–'}`,
        ],
      },
    );
  }
  const e = r.sealed;
  if (e)
    primary.push({
      name: 'payload encryption',
      goal: 'turn p50 sealed (KEEL_PAYLOAD_KEYS) ≤ 1.05× a clear Keel (KEEL_PAYLOAD_ENCRYPTION=off), turns alternating',
      measured: `${e.sealed.p50Ms} ms vs ${e.clear.p50Ms} ms: ${e.ratioP50}×`,
      met: e.ratioP50 <= 1.05,
      breakdown: [
        `p95 ${e.sealed.p95Ms} ms vs ${e.clear.p95Ms} ms, mean ${e.sealed.meanMs} ms vs ${e.clear.meanMs} ms, ` +
          `${e.turns} turns each`,
      ],
    });
  const o = r.overhead;
  if (o)
    secondary.push({
      name: 'turn overhead',
      goal: 'Keel p50 ≤ 1.5× the bare floor',
      measured: `${o.keel.p50Ms} ms vs ${o.floor.p50Ms} ms: ${o.ratioP50}×`,
      met: o.ratioP50 <= 1.5,
      breakdown: [
        `Keel: ${breakdownLine(o.keel.breakdownPerTurn)}`,
        `floor: ${breakdownLine(o.floor.breakdownPerTurn)}`,
      ],
    });
  return { primary, secondary };
}

const row = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;
const kinds = (a: ActionsPer) =>
  Object.entries(a.byKind)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
const writes = (p: PgPer | undefined) =>
  p ? [p.writeTransactions, p.rows, p.walBytes, p.commits] : ['–', '–', '–', '–'];

function goalTable(g: Goal[]): string[] {
  return [
    row(['goal', 'measured', 'met']),
    row(['---', '---', '---']),
    ...g.map((x) => row([x.goal, x.measured, x.met === null ? 'not measured' : x.met ? 'yes' : '**no**'])),
    '',
  ];
}

/**
 * The same probe (bench/workflow-heap.ts) on the bundle of the commit before issue 27's thin workflow code
 * (1cb5bf0), on this machine: its zod schemas, tool registry and gitleaks' rules were built in every workflow.
 */
const HEAP_BEFORE = { commit: '1cb5bf0', bundleBytes: 3_672_735, heapPerWorkflowKiB: 1510 };

function heapSection(h: NonNullable<BenchResults['heap']>): string[] {
  return [
    '## Workflow code',
    '',
    "The SDK's reusable V8 context evaluates the bundle's modules once for each workflow it caches, so whatever a " +
      'workflow module builds when loaded is paid per cached workflow. Measured by `bench/workflow-heap.ts`: ' +
      `${h.workflows} conversation workflows started on a worker in this process (debug mode: the same reusable ` +
      'context, on this thread), each waiting for work in the cache; the V8 heap they add after a GC, per workflow.',
    '',
    row(['', 'bundle bytes', 'heap per cached conversation workflow']),
    row(['---', '---:', '---:']),
    row([`before (${HEAP_BEFORE.commit})`, n(HEAP_BEFORE.bundleBytes), `${HEAP_BEFORE.heapPerWorkflowKiB} KiB`]),
    row(['now', n(h.bundleBytes), `${h.heapPerWorkflowKiB} KiB`]),
    '',
    'The bundle still carries the checks of histories recorded before (workflows/history-checks.ts: the tool ' +
      'schemas, the reply guard and its rules), loaded the first time such a history needs one; a workflow of ' +
      'today never loads them.',
    '',
  ];
}

function idleSection(i: NonNullable<BenchResults['idle']>): string[] {
  const snap = (label: string, s: typeof i.atEnd | null) =>
    s
      ? row([
          label,
          n(s.conversations),
          s.worker.rssMiB,
          s.api.rssMiB,
          n(s.runningConversations),
          s.stickyCache === null ? '–' : n(s.stickyCache),
        ])
      : row([label, '–', '–', '–', '–', '–']);
  const w = i.firstTurnAfterIdle;
  return [
    '## Idle conversations',
    '',
    `${n(i.generated)} of ${n(i.conversations)} conversations, one turn each through the API (\`wait\`), ` +
      `${i.concurrency} at a time: ${i.generatedSeconds} s, ${i.turnsPerSecond} turns/s` +
      (i.failedTurns ? `, ${i.failedTurns} turns not replied` : '') +
      `. Keel ran with KEEL_CONVERSATION_IDLE_MS=${i.idleMs}; the bench then polled Temporal's count of running ` +
      'conversation workflows every 5 s until it reached 0 or the idle time and a grace had passed.',
    '',
    row(['', 'conversations', 'worker MiB', 'API MiB', 'running conversation workflows', "worker's cache"]),
    row(['---', '---:', '---:', '---:', '---:', '---:']),
    snap('checkpoint', i.atCheckpoint),
    snap('after the last turn', i.atEnd),
    snap(`after idling (${i.idling.waitedSeconds} s)`, i.afterIdle),
    row(['peak while generating', '', i.peak.workerMiB, i.peak.apiMiB, '', '']),
    '',
    `First turn after idle: ${w.conversations} idle conversations woken one at a time ` +
      `(${w.fromClosed} had a closed workflow), each followed at once by a second message to the now open ` +
      "workflow (warm); both timed from the POST to the conversation's `turn.finished` event.",
    '',
    row(['', 'p50 ms', 'p95 ms', 'mean ms']),
    row(['---', '---:', '---:', '---:']),
    row(['woken', w.woken.p50Ms, w.woken.p95Ms, w.woken.meanMs]),
    row(['warm', w.warm.p50Ms, w.warm.p95Ms, w.warm.meanMs]),
    '',
    `- woken: ${breakdownLine(w.woken.breakdownPerTurn)}`,
    `- warm: ${breakdownLine(w.warm.breakdownPerTurn)}`,
    '',
  ];
}

function burstSection(b: NonNullable<BenchResults['burst']>): string[] {
  const k = b.keel;
  return [
    '## Burst',
    '',
    `${b.jobs} jobs due at the same second (\`at\` schedules), each delivering to a local webhook; the floor is ` +
      `${b.floor.schedules} bare Temporal Schedules that each start an empty workflow at one second, on the same ` +
      "server before Keel's burst. Fire = the action's nominal time (TemporalScheduledStartTime); start = the " +
      "workflow's start time.",
    '',
    row(['fire → start', 'p50 ms', 'p99 ms', 'max ms', 'all delivered after', 'mean run', 'one slot (Phantom)']),
    row(['---', '---:', '---:', '---:', '---:', '---:', '---:']),
    row([
      'Keel',
      k.delayMs.p50,
      k.delayMs.p99,
      k.delayMs.max,
      `${k.allDeliveredAfterMs} ms`,
      `${k.meanRunMs} ms`,
      `${k.oneSlotAllDoneMs} ms`,
    ]),
    row(['floor', b.floor.delayMs.p50, b.floor.delayMs.p99, b.floor.delayMs.max, '–', '–', '–']),
    ...(b.footprint
      ? [
          row([
            "Temporal's part of a job run",
            b.footprint.delayMs.p50,
            b.footprint.delayMs.p99,
            b.footprint.delayMs.max,
            `${b.footprint.lastClosedMs} ms (closed)`,
            '–',
            '–',
          ]),
        ]
      : []),
    ...(b.durable?.allDeliveredAfterMs
      ? [
          row([
            'the least a durable run does',
            b.durable.delayMs.p50,
            b.durable.delayMs.p99,
            b.durable.delayMs.max,
            `${b.durable.allDeliveredAfterMs} ms`,
            '–',
            '–',
          ]),
        ]
      : []),
    '',
    ...jobRunLines(k).map((l) => `- ${l}`),
    ...footprintLines(b).map((l) => `- ${l}`),
    '',
  ];
}

function costsSection(r: BenchResults): string[] {
  const c = r.costs;
  const lines = [
    '## Costs per unit of work',
    '',
    "Temporal Cloud's billable actions, counted from the histories by its definition " +
      '(docs.temporal.io/cloud/actions): workflow starts (update-with-start, continue-as-new), child workflows (2), ' +
      'activity attempts, local activities (one per workflow task that records any), timers, signals, accepted ' +
      "Updates, search attribute upserts, and a Schedule's 2 per fire. Queries and heartbeats are not in " +
      "histories and not counted. PostgreSQL, around the batch, less Keel's background rate over the same time: " +
      'write transactions (transaction ids given out), rows inserted, updated and deleted and all transactions, ' +
      'reads included (pg_stat_database), WAL bytes (the WAL position).',
    '',
    row(['unit', 'actions', 'by kind', 'PG write transactions', 'PG rows written', 'WAL bytes', 'PG transactions']),
    row(['---', '---:', '---', '---:', '---:', '---:', '---:']),
  ];
  const ok = <T extends object>(x: T | { error: string } | undefined): T | undefined =>
    x && !('error' in x) ? x : undefined;
  const turn = ok(c?.turn);
  if (turn)
    lines.push(
      row([
        `turn (conversations of ${turn.turnsEach} turns, start included)`,
        turn.actionsPerTurn.total,
        kinds(turn.actionsPerTurn),
        ...writes(turn.pgWritesPerTurn),
      ]),
    );
  const one = r.idle?.oneTurnConversation;
  if (one)
    lines.push(
      row([
        `one-turn conversation, closed when idle (${one.historyBytes} history bytes)`,
        one.actions.total,
        kinds(one.actions),
        ...writes(undefined),
      ]),
    );
  const job = r.burst?.keel;
  if (job)
    lines.push(
      row([
        "job run (with its turn and the Schedule's fire)",
        job.actionsPerRun.total,
        kinds(job.actionsPerRun),
        ...writes(job.pgWritesPerRun),
      ]),
    );
  const d = ok(c?.delegate);
  if (d)
    lines.push(
      row(['delegate run (its workflow)', d.actionsPerDelegate.total, kinds(d.actionsPerDelegate), '', '', '', '']),
      row([
        'delegate run with its spawning and relay turns',
        d.actionsWithTurns.total,
        kinds(d.actionsWithTurns),
        ...writes(d.pgWritesWithTurns),
      ]),
    );
  const rt = ok(c?.routine);
  if (rt)
    lines.push(
      row(['routine run (saved tool)', rt.actionsPerRun.total, kinds(rt.actionsPerRun), ...writes(rt.pgWritesPerRun)]),
    );
  for (const [k, v] of Object.entries(c ?? {}))
    if (v && typeof v === 'object' && 'error' in v) lines.push('', `The ${k} costs were not measured: ${v.error}`);
  if (c)
    lines.push(
      '',
      `Background rate subtracted: ${c.pgNoisePerSecond.writeTransactions.toFixed(2)} write transactions/s, ` +
        `${c.pgNoisePerSecond.commits.toFixed(2)} transactions/s, ` +
        `${c.pgNoisePerSecond.rows.toFixed(2)} rows/s, ${c.pgNoisePerSecond.walBytes.toFixed(0)} WAL bytes/s.`,
    );
  lines.push('');
  return lines;
}

function historySection(h: NonNullable<BenchResults['history']>): string[] {
  return [
    '## History growth and bytes per turn',
    '',
    `${h.turns} turns (fewer than the 500 of earlier reports, to keep the run within 40 minutes). Each turn is ` +
      `one ${h.messageBytes}-byte user message and its reply. The minimal turn (an Update that runs one empty ` +
      "activity) alternates with Keel's; the transcript-in-history baseline passes the whole transcript into each " +
      'model activity.',
    '',
    row(['turn', 'Keel bytes', 'Keel events', 'Keel runs', 'minimal bytes', 'baseline bytes', 'baseline events']),
    row(['---:', '---:', '---:', '---:', '---:', '---:', '---:']),
    ...h.keel.at.map((k) => {
      const m = h.minimal.at.find((x) => x.turn === k.turn);
      const b = h.baseline.at.find((x) => x.turn === k.turn);
      return row([k.turn, k.bytes, k.events, k.runs, m?.bytes ?? '', b?.bytes ?? '', b?.events ?? '']);
    }),
    '',
    row(['bytes added per turn', 'turns 1 → last', 'around turn 10', 'around turn 100', `around turn ${h.turns}`]),
    row(['---', '---:', '---:', '---:', '---:']),
    row([
      'Keel',
      h.keel.bytesPerTurn.overall,
      h.keel.bytesPerTurn.at10,
      h.keel.bytesPerTurn.at100,
      h.keel.bytesPerTurn.atLast,
    ]),
    row([
      'minimal turn',
      h.minimal.bytesPerTurn.overall,
      h.minimal.bytesPerTurn.at10,
      h.minimal.bytesPerTurn.at100,
      h.minimal.bytesPerTurn.atLast,
    ]),
    row(['baseline', '', h.baseline.bytesPerTurn.at10, h.baseline.bytesPerTurn.at100, h.baseline.bytesPerTurn.atLast]),
    '',
    `The baseline's history would cross Temporal's 50 MiB limit at turn ${h.baseline.crosses50MiBAtTurn ?? 'never'} ` +
      '(its bytes per turn grow with the transcript: fitted from the measured slopes). ' +
      "Keel's conversation continues as new when Temporal suggests it, so no run grows without bound.",
    '',
    ...(h.baseline.endedByTemporal
      ? [
          `The baseline did not reach turn ${h.turns}: ` +
            `Temporal ended it (${h.baseline.endedByTemporal.status}) at turn ${h.baseline.endedByTemporal.turn}: ` +
            `${h.baseline.endedByTemporal.reason}`,
          '',
        ]
      : []),
    "Where the bytes per turn go (the latest run's history by event type, divided by that run's turns):",
    '',
    row(['event', 'Keel bytes per turn', 'minimal turn']),
    row(['---', '---:', '---:']),
    ...Object.entries(h.keel.bytesPerTurnByEvent).map(([k, v]) => row([k, v, h.minimal.bytesPerTurnByEvent[k] ?? ''])),
    ...Object.entries(h.minimal.bytesPerTurnByEvent)
      .filter(([k]) => !(k in h.keel.bytesPerTurnByEvent))
      .map(([k, v]) => row([k, '', v])),
    '',
  ];
}

/**
 * The design changes tried for the goals still missed, with their measured effect and the next change: written by
 * hand in bench/CHANGES-TRIED.md (they come from runs and profiles this report does not repeat).
 */
async function changesTried(): Promise<string[]> {
  const text = await readFile(path.join(__dirname, 'CHANGES-TRIED.md'), 'utf8').catch(() => '');
  return text ? [text.trimEnd().replace(/^# /, '### '), ''] : [];
}

export async function writeReport(r: BenchResults, dir: string): Promise<void> {
  const g = goals(r);
  await writeFile(path.join(dir, 'results.json'), `${JSON.stringify({ ...r, goals: g }, null, 2)}\n`);
  const o = r.overhead;
  const t = r.throughput;
  const missed = g.primary.filter((x) => x.met === false);
  const lines = [
    '# Keel benchmarks',
    '',
    `Run ${r.startedAt} by \`npm run bench\`${r.scale !== 1 ? ` at scale ${r.scale}` : ''} (${r.minutes} minutes), ` +
      `on ${r.machine.cores} × ${r.machine.cpu}, ${r.machine.memoryGiB} GiB, ` +
      `Node ${r.machine.node}, ${r.machine.platform}.`,
    'One Temporal dev server (SQLite) and one embedded PostgreSQL for everything; the scripted model at zero delay;',
    "Keel's worker and API and the comparison workflows' worker each in a process of their own. Every figure, with its",
    `baseline, is in \`results.json\`. Keel's settings: ` +
      Object.entries(r.config)
        .map(([k, v]) => `${k}=${v}`)
        .join(', ') +
      '.',
    ...(r.scenarios.length < 7 ? ['', `Only these scenarios ran: ${r.scenarios.join(', ')}.`] : []),
    '',
    '## Goals',
    '',
    ...goalTable(g.primary),
    'Kept from earlier reports, as secondary figures:',
    '',
    ...goalTable(g.secondary),
    ...(missed.length
      ? [
          '### Where the time, bytes or memory go, for each goal not met',
          '',
          ...missed.flatMap((x) => [`**${x.goal}** (${x.measured})`, '', ...x.breakdown.map((l) => `- ${l}`), '']),
          ...(await changesTried()),
        ]
      : []),
    ...(Object.keys(r.errors).length
      ? ['## Scenarios that failed', '', ...Object.entries(r.errors).map(([k, v]) => `- ${k}: ${v}`), '']
      : []),
    ...(r.heap ? heapSection(r.heap) : []),
    ...(r.idle ? idleSection(r.idle) : []),
    ...(r.burst ? burstSection(r.burst) : []),
    ...(t
      ? [
          '## Throughput',
          '',
          `${t.conversations} conversations × ${t.turnsEach} turns, all at once ` +
            '(Keel through its API with `wait`; the floor through update-with-start, ' +
            `${r.shape?.activitiesPerTurn ?? '?'} empty activities per turn: Keel's regular activities per turn).`,
          '',
          row(['', 'seconds', 'turns/s', 'worker CPU s/turn', 'API CPU s/turn']),
          row(['---', '---:', '---:', '---:', '---:']),
          row([
            'Keel',
            t.keel.seconds,
            t.keel.turnsPerSecond,
            t.keel.workerCpuSecondsPerTurn,
            t.keel.apiCpuSecondsPerTurn,
          ]),
          row(['bare floor', t.floor.seconds, t.floor.turnsPerSecond, t.floor.workerCpuSecondsPerTurn, '–']),
          '',
          `- Keel, per turn: ${breakdownLine(t.keel.breakdownPerTurn)}`,
          `- floor, per turn: ${breakdownLine(t.floor.breakdownPerTurn)}`,
          '',
        ]
      : []),
    ...(r.costs || r.burst || r.idle ? costsSection(r) : []),
    ...(r.history ? historySection(r.history) : []),
    ...(r.sealed
      ? [
          '## Payload encryption',
          '',
          `Submit → reply over ${r.sealed.turns} sequential turns on this run's Keel, whose payloads are sealed ` +
            '(AES-256-GCM, as npm start runs it), and as many on a second Keel started on the same machine with ' +
            "KEEL_PAYLOAD_ENCRYPTION=off; their turns alternate. Each is timed from the POST to the conversation's " +
            '`turn.finished` event.',
          '',
          row(['', 'p50 ms', 'p95 ms', 'mean ms']),
          row(['---', '---:', '---:', '---:']),
          row(['sealed', r.sealed.sealed.p50Ms, r.sealed.sealed.p95Ms, r.sealed.sealed.meanMs]),
          row(['clear', r.sealed.clear.p50Ms, r.sealed.clear.p95Ms, r.sealed.clear.meanMs]),
          '',
        ]
      : []),
    ...(o
      ? [
          '## Turn overhead',
          '',
          `Submit → reply recorded over ${o.turns} sequential turns. ` +
            "Keel is timed from the POST to the conversation's `turn.finished` event (SSE), " +
            "published right after the turn's end is committed; " +
            `the floor is an update that runs ${o.activitiesPerTurn} empty activities (Keel's regular activities ` +
            "per turn) in a row. Keel's turns and the floor's alternate, so both see the same machine.",
          '',
          row(['', 'p50 ms', 'p95 ms', 'mean ms']),
          row(['---', '---:', '---:', '---:']),
          row(['Keel', o.keel.p50Ms, o.keel.p95Ms, o.keel.meanMs]),
          row(['bare floor', o.floor.p50Ms, o.floor.p95Ms, o.floor.meanMs]),
          '',
          `- Keel: ${breakdownLine(o.keel.breakdownPerTurn)}`,
          `- floor: ${breakdownLine(o.floor.breakdownPerTurn)}`,
          '',
        ]
      : []),
    ...(r.shape
      ? [
          "A Keel turn's steps, counted from histories (a six-turn conversation less a one-turn one, per turn): " +
            `regular activities ${Object.entries(r.shape.activities)
              .map(([k, v]) => `${k} ×${v}`)
              .join(', ')}; local activities ${
              Object.entries(r.shape.localActivities)
                .map(([k, v]) => `${k} ×${v}`)
                .join(', ') || 'none'
            }.`,
          '',
        ]
      : []),
    '## Memory',
    '',
    row(['resident MiB', 'worker', 'API']),
    row(['---', '---:', '---:']),
    row(['at start', r.memoryAtStart.workerMiB, r.memoryAtStart.apiMiB]),
    ...(t ? [row([`${t.conversations} concurrent conversations (peak)`, t.memory.workerMiB, t.memory.apiMiB])] : []),
    ...(r.idle
      ? [
          row([`${n(r.idle.generated)} one-turn conversations (peak)`, r.idle.peak.workerMiB, r.idle.peak.apiMiB]),
          row(['the same, after idling', r.idle.afterIdle.worker.rssMiB, r.idle.afterIdle.api.rssMiB]),
        ]
      : []),
    '',
    `Seconds per scenario: ${Object.entries(r.secondsPerScenario)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.`,
    '',
  ];
  await writeFile(path.join(dir, 'REPORT.md'), lines.join('\n'));
}

/** A bench's own section of bench/REPORT.md, replaced in place between its markers (appended the first time). */
export async function replaceReportSection(markers: { begin: string; end: string }, section: string): Promise<void> {
  const file = path.join(REPO_ROOT, 'bench', 'REPORT.md');
  const report = await readFile(file, 'utf8');
  const at = report.indexOf(markers.begin);
  const next =
    at < 0
      ? `${report.trimEnd()}\n\n${section}\n`
      : `${report.slice(0, at)}${section}${report.slice(report.indexOf(markers.end) + markers.end.length)}`;
  await writeFile(file, next);
}
