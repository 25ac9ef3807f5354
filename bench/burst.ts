/**
 * The burst: many jobs due at the same instant. The floor is the same number of bare Temporal Schedules, each
 * starting an empty workflow at one instant, measured in the same run on the same server: what Temporal alone takes
 * to start them all.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import {
  MONTHS,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleOptions,
  type WorkflowExecutionInfo,
} from '@temporalio/client';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type pg from 'pg';
import { freePort } from '../scripts/ports';
import type { KeelStack } from '../scripts/keel-stack';
import { jobRunSearchAttributes } from '../services/jobs';
import {
  actionsMatching,
  actionsPer,
  addActions,
  pgPer,
  pgWritesOf,
  STATS_SETTLE_MS,
  type PgCounters,
} from './actions';
import { DURABLE_FLOOR_TABLES } from './baseline-activities';
import { BENCH_QUEUE, pool, sleep } from './drive';
import { addBreakdown, breakdownOf, emptyBreakdown, percentile, perTurn, round, runsMatching } from './measure';

/** The nominal time of the Schedule's action that started a workflow (set by Temporal on every scheduled start). */
const SCHEDULED_AT = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

/** Fire → start delay of a scheduled workflow: its start time less its action's nominal time (or `due`). */
const delayOf = (w: WorkflowExecutionInfo, due: number) =>
  w.startTime.getTime() - (w.typedSearchAttributes.get(SCHEDULED_AT)?.getTime() ?? due);

const spread = (delays: number[]) => ({
  p50: round(percentile(delays, 50)),
  p99: round(percentile(delays, 99)),
  max: round(Math.max(...delays)),
});

/** The whole second `leadMs` from now: time enough to create every schedule before it. */
const dueIn = (leadMs: number) => Math.ceil((Date.now() + leadMs) / 1000) * 1000;

/** An `at` calendar for one UTC second, the spec Keel gives a one-shot job (services/jobs.ts). */
function atSecond(due: number): ScheduleOptions['spec'] {
  const d = new Date(due);
  const month = MONTHS[d.getUTCMonth()]!;
  return {
    calendars: [
      {
        year: d.getUTCFullYear(),
        month,
        dayOfMonth: d.getUTCDate(),
        hour: d.getUTCHours(),
        minute: d.getUTCMinutes(),
        second: d.getUTCSeconds(),
      },
    ],
    timezone: 'UTC',
  };
}

/**
 * The floors' shapes: an empty workflow (the floor), Temporal's part of a Keel job run (`footprint`), and that part
 * with the least a durable run does in its step, delivering to a webhook (`durable`).
 */
type FloorShape = 'empty' | 'footprint' | 'durable';

const FLOOR_TYPES: Record<FloorShape, string> = {
  empty: 'emptyWorkflow',
  footprint: 'jobRunFootprint',
  durable: 'jobRunDurableFloor',
};

/** A floor's Schedule action; a durable floor's runs deliver to `url`. */
function floorAction(shape: FloorShape, id: string, i: number, url: string): ScheduleOptions['action'] {
  const workflow = {
    type: 'startWorkflow' as const,
    workflowType: FLOOR_TYPES[shape],
    workflowId: id,
    taskQueue: BENCH_QUEUE,
  };
  if (shape === 'empty') return workflow;
  return {
    ...workflow,
    args: [shape === 'durable' ? { jobId: id, url } : { jobId: `job-${id}` }],
    typedSearchAttributes: jobRunSearchAttributes('bench-floor', `job-${id}`),
    staticSummary: `Run of job "report ${i}"`,
  };
}

/** A local webhook receiver: when each delivery arrived. */
async function webhookReceiver() {
  const arrivals: number[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.push(Date.now());
      res.writeHead(200).end();
    });
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${port}/hook`, arrivals, close: () => server.close() };
}

/** The durable floor's tables, as plain as a run's row and a ledger row can be (baseline-activities.ts). */
async function durableTables(db: pg.Pool, create: boolean): Promise<void> {
  const { runs, effects } = DURABLE_FLOOR_TABLES;
  await db.query(`DROP TABLE IF EXISTS ${runs}, ${effects}`);
  if (!create) return;
  await db.query(`CREATE TABLE ${runs} (run_id text PRIMARY KEY, status text NOT NULL DEFAULT 'running',
    answer text, started_at timestamptz NOT NULL DEFAULT now(), finished_at timestamptz)`);
  await db.query(`CREATE TABLE ${effects} (key text PRIMARY KEY, status text NOT NULL DEFAULT 'pending',
    attempts integer NOT NULL DEFAULT 1, updated_at timestamptz NOT NULL DEFAULT now())`);
}

/**
 * The floor: `count` Schedules that each start an empty workflow on the bench worker's queue at the same second.
 * `footprint`: each starts Temporal's part of a Keel job run instead (baseline-workflows.ts `jobRunFootprint`);
 * `durable`: that part with the least a durable run does, each delivering to a local webhook (it needs `db`).
 */
export async function floorBurst(client: Client, count: number, shape: FloorShape = 'empty', db?: pg.Pool) {
  const run = randomUUID().slice(0, 8);
  const ids = Array.from({ length: count }, (_, i) => `burst-floor-${run}-${i}`);
  const due = dueIn(10_000 + count * 50);
  const receiver = await webhookReceiver();
  if (shape === 'durable') {
    if (!db) throw new Error('the durable floor needs the database');
    await durableTables(db, true);
  }
  try {
    await pool(count, 8, async (i) => {
      await client.schedule.create({
        scheduleId: ids[i]!,
        spec: atSecond(due),
        action: floorAction(shape, ids[i]!, i, receiver.url),
        policies: { overlap: ScheduleOverlapPolicy.ALLOW_ALL, catchupWindow: '10 minutes' },
        state: { remainingActions: 1 },
        ...(shape === 'empty' ? {} : { memo: { agent: 'bench-floor', job: `report ${i}` } }),
      });
    });
    const lateBy = Date.now() - due;
    const query = `WorkflowType = "${FLOOR_TYPES[shape]}" AND WorkflowId STARTS_WITH "burst-floor-${run}-"`;
    // Until every one has started and closed (the last to close is what a footprint floor is held to).
    const closed = `${query} AND ExecutionStatus = "Completed"`;
    for (const deadline = due + 10 * 60_000; Date.now() < deadline; await sleep(500))
      if ((await client.workflow.count(closed)).count >= count) break;
    const delays: number[] = [];
    let lastClosedMs = 0;
    for await (const w of client.workflow.list({ query })) {
      delays.push(delayOf(w, due));
      lastClosedMs = Math.max(lastClosedMs, (w.closeTime?.getTime() ?? Infinity) - due);
    }
    if (delays.length < count) throw new Error(`only ${delays.length} of ${count} floor workflows started`);
    if (shape === 'durable' && receiver.arrivals.length < count)
      throw new Error(`only ${receiver.arrivals.length} of ${count} durable floor deliveries arrived`);
    return {
      schedules: count,
      delayMs: spread(delays),
      lastClosedMs,
      ...(shape === 'durable' ? { allDeliveredAfterMs: round(Math.max(...receiver.arrivals) - due) } : {}),
      createdLateByMs: lateBy > 0 ? lateBy : 0,
    };
  } finally {
    receiver.close();
    if (shape === 'durable') await durableTables(db!, false).catch(() => undefined);
    await pool(count, 8, (i) =>
      client.schedule
        .getHandle(ids[i]!)
        .delete()
        .catch(() => undefined),
    );
  }
}

/** Keel: `count` jobs due at the same second, each delivering to a local webhook. */
async function keelBurst(stack: KeelStack, client: Client, db: pg.Pool, noise: PgCounters, count: number) {
  const receiver = await webhookReceiver();
  const { arrivals } = receiver;
  const agent = `bench-jobs-${randomUUID().slice(0, 8)}`;
  try {
    // Time to create the jobs, then for PostgreSQL's stats of their creation to arrive before the fire.
    const due = dueIn(15_000 + count * 150 + STATS_SETTLE_MS);
    await pool(count, 4, async (i) => {
      const res = await fetch(`${stack.api}/v1/agents/${agent}/jobs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          name: `report ${i}`,
          schedule: { kind: 'at', at: new Date(due).toISOString() },
          task: `report ${i}`,
          delivery: { channel: 'webhook', url: receiver.url },
        }),
      });
      if (res.status !== 201) throw new Error(`job ${i}: ${res.status} ${await res.text()}`);
    });
    const lateBy = Date.now() - due;
    await sleep(due - 500 - Date.now());
    // PostgreSQL's writes from the fire to the last delivery: the job runs' own (their creation came before).
    const { writes } = await pgWritesOf(
      db,
      noise,
      async () => {
        for (const deadline = due + 10 * 60_000; arrivals.length < count && Date.now() < deadline;) await sleep(200);
      },
      true,
    );
    if (arrivals.length < count) throw new Error(`only ${arrivals.length} of ${count} job deliveries arrived`);
    const runs = `KeelKind = "job" AND KeelAgentId = "${agent}"`;
    const delays: number[] = [];
    for await (const w of client.workflow.list({ query: runs })) delays.push(delayOf(w, due));
    const { rows } = await db.query<{ ms: number }>(
      `SELECT EXTRACT(EPOCH FROM (r.finished_at - r.fired_at)) * 1000 AS ms
       FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.agent_id = $1 AND r.status = 'ok'`,
      [agent],
    );
    const runMs = rows.map((r) => Number(r.ms));
    const meanRunMs = runMs.reduce((a, b) => a + b, 0) / Math.max(1, runMs.length);
    // Where a run's time goes: its own history and its turn's, in the job's conversation (both per job run).
    const ofRuns = emptyBreakdown();
    const ofTurns = emptyBreakdown();
    for await (const r of runsMatching(client, `KeelAgentId = "${agent}"`))
      addBreakdown(r.workflowId.startsWith('conv:') ? ofTurns : ofRuns, breakdownOf(r.events));
    // Every workflow of the job's agent is a job run or a job's conversation; each fire adds the Schedule's two.
    const { actions } = await actionsMatching(client, `KeelAgentId = "${agent}"`);
    addActions(actions, { 'schedule fire': 2 * count });
    return {
      jobs: count,
      delayMs: spread(delays),
      allDeliveredAfterMs: round(Math.max(...arrivals) - due),
      meanRunMs: round(meanRunMs),
      // Phantom runs due jobs one at a time in a single slot: the last of them starts after all the others ran.
      oneSlotAllDoneMs: round(meanRunMs * count),
      createdLateByMs: lateBy > 0 ? lateBy : 0,
      breakdownPerRun: { run: perTurn(ofRuns, count), turn: perTurn(ofTurns, count) },
      actionsPerRun: actionsPer(actions, count),
      pgWritesPerRun: pgPer(writes, count),
    };
  } finally {
    receiver.close();
  }
}

export async function burstRun(stack: KeelStack, client: Client, db: pg.Pool, noise: PgCounters, count: number) {
  const floor = await floorBurst(client, count);
  console.log(`bench: burst floor ${JSON.stringify(floor.delayMs)}`);
  // Temporal's own part of a Keel job run, on the same server: what of Keel's time is not Keel's work.
  const footprint = await floorBurst(client, count, 'footprint');
  console.log(`bench: burst footprint ${JSON.stringify({ ...footprint.delayMs, lastClosed: footprint.lastClosedMs })}`);
  // The least a durable run does, on Temporal with nothing of Keel's: what Keel's own work is held against.
  const durable = await floorBurst(client, count, 'durable', db);
  const delivered = durable.allDeliveredAfterMs;
  console.log(`bench: burst durable floor ${JSON.stringify({ ...durable.delayMs, delivered })}`);
  const keel = await keelBurst(stack, client, db, noise, count);
  const ratioP99 = round(keel.delayMs.p99 / Math.max(1, floor.delayMs.p99), 2);
  return { jobs: count, floor, footprint, durable, keel, ratioP99 };
}
