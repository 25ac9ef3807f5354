/**
 * What a unit of Keel's work costs the services it runs on: Temporal Cloud's billable actions, counted from
 * histories, and PostgreSQL's writes, read from pg_stat_database around a batch. docs/capacity.md is built on them.
 */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type pg from 'pg';
import { markerActivity, round, runsMatching } from './measure';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const EventType = temporal.api.enums.v1.EventType;

/** Billable actions by kind. */
export type ActionCounts = Record<string, number>;

/**
 * The billable actions one run's history shows, by Temporal Cloud's definition (docs.temporal.io/cloud/actions):
 * a workflow start (client, update-with-start, continue-as-new), a child workflow (two: its start and its execution,
 * counted here in the child's own history), each activity attempt, all local activities (markers) of one workflow
 * task together as one (a patch's marker is no action), each timer, each signal (counted where it is received), each
 * accepted Update, each search attribute upsert. Not in a history, so not counted here: queries, heartbeats,
 * rejected Updates, and a Schedule's two actions per fire (the caller adds those).
 */
export function billableActions(events: readonly HistoryEvent[]): ActionCounts {
  const out: ActionCounts = {};
  const add = (kind: string, n = 1) => (out[kind] = (out[kind] ?? 0) + n);
  const markerTasks = new Set<number>();
  for (const e of events) {
    switch (e.eventType) {
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        if (e.workflowExecutionStartedEventAttributes?.parentWorkflowExecution) add('child workflow', 2);
        else add('workflow start');
        break;
      case EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        add('activity', Math.max(1, e.activityTaskStartedEventAttributes?.attempt ?? 1));
        break;
      case EventType.EVENT_TYPE_MARKER_RECORDED:
        // A patch's marker is not billed; TypeScript has no side effects, so local activities are the rest.
        if (markerActivity(e))
          markerTasks.add(Number(e.markerRecordedEventAttributes?.workflowTaskCompletedEventId ?? e.eventId));
        break;
      case EventType.EVENT_TYPE_TIMER_STARTED:
        add('timer');
        break;
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        add('signal');
        break;
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        add('update');
        break;
      case EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: {
        // The versioning attribute alone is exempt.
        const keys = Object.keys(
          e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {},
        );
        if (keys.some((k) => k !== 'TemporalChangeVersion')) add('search attribute upsert');
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
        add('options update');
        break;
    }
  }
  if (markerTasks.size) add('local activities (per workflow task)', markerTasks.size);
  return out;
}

export function addActions(a: ActionCounts, b: ActionCounts): ActionCounts {
  for (const [k, v] of Object.entries(b)) a[k] = (a[k] ?? 0) + v;
  return a;
}

export const totalActions = (a: ActionCounts) => Object.values(a).reduce((x, y) => x + y, 0);

/** The actions of every run a visibility query matches, summed, with the number of runs. */
export async function actionsMatching(client: Client, query: string): Promise<{ actions: ActionCounts; runs: number }> {
  const actions: ActionCounts = {};
  let runs = 0;
  for await (const r of runsMatching(client, query)) {
    addActions(actions, billableActions(r.events));
    runs++;
  }
  return { actions, runs };
}

/** Actions per unit of work, rounded: the total first, then each kind. */
export function actionsPer(actions: ActionCounts, units: number) {
  const each = (n: number) => round(n / Math.max(1, units), 2);
  return {
    total: each(totalActions(actions)),
    byKind: Object.fromEntries(
      Object.entries(actions)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => [k, each(v)]),
    ),
  };
}
export type ActionsPer = ReturnType<typeof actionsPer>;

/** PostgreSQL's cumulative counters for Keel's database. */
export interface PgCounters {
  /** Committed transactions, reads included. */
  commits: number;
  /** Transactions that wrote (each is given a transaction id; a read-only one is not). */
  writeTransactions: number;
  /** Rows inserted, updated and deleted. */
  rows: number;
  /** WAL bytes written. */
  walBytes: number;
}

async function pgCounters(db: pg.Pool): Promise<PgCounters & { at: number }> {
  // Transaction ids and the WAL position are exact at once; commits and rows arrive with the stats flush.
  const { rows } = await db.query<{ commits: string; xids: string; tuples: string; wal: string }>(
    `SELECT xact_commit AS commits, pg_snapshot_xmax(pg_current_snapshot())::text AS xids,
            tup_inserted + tup_updated + tup_deleted AS tuples, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') AS wal
     FROM pg_stat_database WHERE datname = current_database()`,
  );
  const r = rows[0]!;
  return {
    commits: Number(r.commits),
    writeTransactions: Number(r.xids),
    rows: Number(r.tuples),
    walBytes: Number(r.wal),
    at: Date.now(),
  };
}

/**
 * A backend reports its statistics when idle at most every 10 s (PGSTAT_IDLE_INTERVAL), so a batch's commits and rows
 * are all counted only that long after it ended.
 */
export const STATS_SETTLE_MS = 11_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Writes per second while nothing is being driven (Keel's own background work and the bench's reads). */
export async function pgNoise(db: pg.Pool): Promise<PgCounters> {
  await sleep(STATS_SETTLE_MS);
  const a = await pgCounters(db);
  await sleep(STATS_SETTLE_MS);
  const b = await pgCounters(db);
  const s = (b.at - a.at) / 1000;
  const rate = (k: keyof PgCounters) => (b[k] - a[k]) / s;
  return {
    commits: rate('commits'),
    writeTransactions: rate('writeTransactions'),
    rows: rate('rows'),
    walBytes: rate('walBytes'),
  };
}

/**
 * Runs a batch and returns PostgreSQL's writes during it, less the background rate over the same time. First it lets
 * the stats of what came before arrive, unless the caller has (`settled`).
 */
export async function pgWritesOf<T>(
  db: pg.Pool,
  noise: PgCounters,
  batch: () => Promise<T>,
  settled = false,
): Promise<{ result: T; writes: PgCounters }> {
  if (!settled) await sleep(STATS_SETTLE_MS);
  const before = await pgCounters(db);
  const result = await batch();
  await sleep(STATS_SETTLE_MS);
  const after = await pgCounters(db);
  const s = (after.at - before.at) / 1000;
  const delta = (k: keyof PgCounters) => Math.max(0, after[k] - before[k] - noise[k] * s);
  return {
    result,
    writes: {
      commits: delta('commits'),
      writeTransactions: delta('writeTransactions'),
      rows: delta('rows'),
      walBytes: delta('walBytes'),
    },
  };
}

export const pgPer = (w: PgCounters, units: number) => ({
  commits: round(w.commits / Math.max(1, units), 1),
  writeTransactions: round(w.writeTransactions / Math.max(1, units), 1),
  rows: round(w.rows / Math.max(1, units), 1),
  walBytes: round(w.walBytes / Math.max(1, units), 0),
});
export type PgPer = ReturnType<typeof pgPer>;
