/**
 * The turn scenarios `npm run bench` measures (bench/run.ts runs them in turn): each drives Keel through its API and
 * the baseline workflows through Temporal, and returns its figures for the report. The idle, burst and cost
 * scenarios are in idle.ts, burst.ts and costs.ts.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { conversationWorkflowId } from '../domain/ids';
import { cpuSeconds, rssMiB, type KeelStack } from '../scripts/keel-stack';
import { bareTurn, say } from './baseline-workflows';
import { AGENT, BENCH_QUEUE, floorStart, keelTurns, MIB, pool, submit, text } from './drive';
import {
  addBreakdown,
  breakdownOf,
  bytesOf,
  emptyBreakdown,
  fetchEvents,
  historyTotals,
  markerActivity,
  percentile,
  perTurn,
  round,
  runsOf,
  updatesIn,
  type HistoryTotals,
} from './measure';

/** What a Keel turn schedules, counted from histories: the floor runs as many empty activities per turn. */
export async function keelTurnShape(stack: KeelStack, client: Client) {
  // A one-turn and a six-turn conversation: their difference over five turns leaves out what a run does once.
  const id = randomUUID().slice(0, 8);
  await keelTurns(stack, `shape-${id}-a`, 1);
  await keelTurns(stack, `shape-${id}-b`, 6);
  const counts = async (conversationId: string) => {
    const workflowId = conversationWorkflowId(AGENT, conversationId);
    const activities: Record<string, number> = {};
    const local: Record<string, number> = {};
    for (const runId of await runsOf(client, workflowId)) {
      for (const e of await fetchEvents(client, workflowId, runId)) {
        const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
        if (name) activities[name] = (activities[name] ?? 0) + 1;
        const la = markerActivity(e);
        if (la) local[la] = (local[la] ?? 0) + 1;
      }
    }
    return { activities, local };
  };
  const [a, b] = [await counts(`shape-${id}-a`), await counts(`shape-${id}-b`)];
  const perTurnOf = (x: Record<string, number>, y: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(y)
        .map(([k, v]) => [k, round((v - (x[k] ?? 0)) / 5, 1)] as const)
        .filter(([, v]) => v > 0),
    );
  const activities = perTurnOf(a.activities, b.activities);
  const local = perTurnOf(a.local, b.local);
  const sum = (r: Record<string, number>) => Object.values(r).reduce((x, y) => x + y, 0);
  return {
    activitiesPerTurn: Math.max(1, Math.round(sum(activities))),
    activities,
    localActivitiesPerTurn: round(sum(local), 1),
    localActivities: local,
  };
}
export type TurnShape = Awaited<ReturnType<typeof keelTurnShape>>;

/** A latency series: its p50, p95 and mean. */
export const stats = (s: number[]) => ({
  p50Ms: round(percentile(s, 50)),
  p95Ms: round(percentile(s, 95)),
  meanMs: round(s.reduce((a, b) => a + b, 0) / Math.max(1, s.length)),
});

/** The time breakdown of a workflow id's latest run, per turn (message) of that run. */
async function latestRunPerTurn(client: Client, workflowId: string) {
  const events = await fetchEvents(client, workflowId);
  return perTurn(breakdownOf(events), updatesIn(events));
}

export async function turnOverhead(stack: KeelStack, client: Client, turns: number, activitiesPerTurn: number) {
  // Keel's turns and the floor's alternate, so that both see the same machine at the same moments.
  const conversationId = `overhead-${randomUUID().slice(0, 8)}`;
  const floorId = `floor-${randomUUID().slice(0, 8)}`;
  const floor: number[] = [];
  const keel = await keelTurns(stack, conversationId, turns, async () => {
    const t0 = performance.now();
    await client.workflow.executeUpdateWithStart(bareTurn, {
      args: [activitiesPerTurn],
      startWorkflowOperation: floorStart(floorId),
    });
    floor.push(performance.now() - t0);
  });
  const workflowId = conversationWorkflowId(AGENT, conversationId);
  const keelHistory = await historyTotals(client, workflowId);
  const keelBreakdown = await latestRunPerTurn(client, workflowId);
  const floorBreakdown = await latestRunPerTurn(client, floorId);
  await client.workflow.getHandle(floorId).terminate('bench done');
  return {
    turns,
    activitiesPerTurn,
    keel: { ...stats(keel), historyRuns: keelHistory.runs, breakdownPerTurn: keelBreakdown },
    floor: { ...stats(floor), breakdownPerTurn: floorBreakdown },
    ratioP50: round(percentile(keel, 50) / percentile(floor, 50), 2),
  };
}

type At = HistoryTotals & { turn: number };

/** Bytes added per turn between two checkpoints (NaN when either is missing). */
const slope = (at: At[], from: number, to: number) => {
  const a = at.find((x) => x.turn === from);
  const b = at.find((x) => x.turn === to);
  return a && b && to > from ? round((b.bytes - a.bytes) / (to - from)) : NaN;
};

/** A latest run's history bytes by event type, per turn of that run, largest first. */
async function bytesPerTurnByEvent(client: Client, workflowId: string): Promise<Record<string, number>> {
  const events = await fetchEvents(client, workflowId);
  const turns = Math.max(1, updatesIn(events));
  return Object.fromEntries(
    Object.entries(bytesOf(events))
      .map(([k, v]) => [k, round(v / turns)] as const)
      .sort((a, b) => b[1] - a[1]),
  );
}

/**
 * Keel's conversation against the minimal turn (an Update that runs one empty activity, alternating with Keel's turns)
 * and, after them, the transcript-in-history baseline: history bytes at checkpoints up to the last turn.
 */
export async function historyGrowth(stack: KeelStack, client: Client, turns: number) {
  const checkpoints = [
    ...new Set([1, 10, 20, 90, 100, 110, turns - 10, turns].filter((t) => t >= 1 && t <= turns)),
  ].sort((a, b) => a - b);
  const conversationId = `history-${randomUUID().slice(0, 8)}`;
  const keelId = conversationWorkflowId(AGENT, conversationId);
  const minimalId = `minimal-${randomUUID().slice(0, 8)}`;
  const keelAt: At[] = [];
  const minimalAt: At[] = [];
  await keelTurns(stack, conversationId, turns, async (turn) => {
    await client.workflow.executeUpdateWithStart(bareTurn, {
      args: [1],
      startWorkflowOperation: floorStart(minimalId),
    });
    if (!checkpoints.includes(turn)) return;
    keelAt.push({ turn, ...(await historyTotals(client, keelId)) });
    minimalAt.push({ turn, ...(await historyTotals(client, minimalId)) });
  });
  const minimalByEvent = await bytesPerTurnByEvent(client, minimalId);
  await client.workflow.getHandle(minimalId).terminate('bench done');

  const baselineId = `baseline-${randomUUID().slice(0, 8)}`;
  const handle = await client.workflow.start('transcriptInHistoryConversation', {
    workflowId: baselineId,
    taskQueue: BENCH_QUEUE,
  });
  const baselineAt: At[] = [];
  // The baseline may not live to the last turn: Temporal ends a workflow whose history or payloads grow too large.
  let baselineEnded: { turn: number; status: string; reason: string } | undefined;
  for (let i = 1; i <= turns && !baselineEnded; i++) {
    try {
      await handle.executeUpdate(say, { args: [text(i)] });
    } catch (err) {
      // Not its history: a page of it is by now larger than a gRPC message may be (4 MiB), itself a symptom.
      const d = await handle.describe();
      baselineEnded = {
        turn: i,
        status: d.status.name,
        reason:
          err instanceof Error
            ? `${err.message}${err.cause instanceof Error ? `: ${err.cause.message}` : ''}`
            : String(err),
      };
      baselineAt.push({ turn: i - 1, ...(await historyTotals(client, baselineId)) });
      break;
    }
    if (checkpoints.includes(i)) baselineAt.push({ turn: i, ...(await historyTotals(client, baselineId)) });
  }
  if (!baselineEnded) await handle.terminate('bench done');
  const slopes = (at: At[]) => ({
    at10: slope(at, 10, 20),
    at100: slope(at, 90, 110),
    atLast: slope(at, turns - 10, turns),
    // Every turn after the first, what a run does once (its start, a continue-as-new) included.
    overall: slope(at, 1, turns),
  });
  const keelPerTurn = slopes(keelAt);
  const minimalPerTurn = slopes(minimalAt);
  // The baseline's last slope: around the last turn, or between its last two checkpoints when Temporal ended it early.
  const [penultimate, last] = baselineAt.slice(-2);
  const baselineLast = slope(baselineAt, turns - 10, turns);
  const early = Number.isNaN(baselineLast) && penultimate && last;
  const baselinePerTurn = {
    at10: slope(baselineAt, 10, 20),
    at100: slope(baselineAt, 90, 110),
    atLast: early ? slope(baselineAt, penultimate.turn, last.turn) : baselineLast,
    lastTurn: early ? (penultimate.turn + last.turn) / 2 : turns - 5,
  };
  // The baseline adds a fixed part plus the whole transcript each turn: bytes per turn grow linearly, so its total
  // is quadratic; fitted from the two measured slopes, the turn at which it crosses Temporal's 50 MiB limit follows.
  const growth = (baselinePerTurn.atLast - baselinePerTurn.at100) / (baselinePerTurn.lastTurn - 100);
  const intercept = baselinePerTurn.at100 - growth * 100;
  let total = last?.bytes ?? 0;
  let crossing = last?.turn ?? 0;
  while (total < 50 * MIB && crossing < 1_000_000 && growth > 0) total += intercept + growth * ++crossing;
  // The turn from which Keel's bytes per turn are 1/20 of the baseline's (the baseline's grow with the transcript).
  const oneTwentiethAtTurn = growth > 0 ? Math.max(1, Math.ceil((20 * keelPerTurn.at100 - intercept) / growth)) : null;
  const keelValues = [keelPerTurn.at10, keelPerTurn.at100, keelPerTurn.atLast].filter((v) => !Number.isNaN(v));
  const spread = keelValues.length
    ? (Math.max(...keelValues) - Math.min(...keelValues)) / Math.min(...keelValues)
    : NaN;
  return {
    turns,
    messageBytes: Buffer.byteLength(text(1)),
    keel: {
      at: keelAt,
      bytesPerTurn: keelPerTurn,
      spread: round(spread, 3),
      // Where Keel's bytes go: the latest run's history by event type, per turn of that run.
      bytesPerTurnByEvent: await bytesPerTurnByEvent(client, keelId),
    },
    minimal: { at: minimalAt, bytesPerTurn: minimalPerTurn, bytesPerTurnByEvent: minimalByEvent },
    baseline: {
      at: baselineAt,
      bytesPerTurn: baselinePerTurn,
      crosses50MiBAtTurn: growth > 0 ? crossing : null,
      keelAtOneTwentiethFromTurn: oneTwentiethAtTurn,
      endedByTemporal: baselineEnded ?? null,
    },
    ratioAt100: round(keelPerTurn.at100 / baselinePerTurn.at100, 4),
    ratioToMinimal: round(keelPerTurn.overall / minimalPerTurn.overall, 2),
  };
}

export async function throughputRun(
  stack: KeelStack,
  client: Client,
  pids: { worker: number; api: number; floor: number },
  conversations: number,
  turnsEach: number,
  activitiesPerTurn: number,
) {
  let peak = { workerMiB: 0, apiMiB: 0 };
  const sampler = setInterval(() => {
    void Promise.all([rssMiB(pids.worker), rssMiB(pids.api)]).then(([w, a]) => {
      peak = { workerMiB: Math.max(peak.workerMiB, round(w)), apiMiB: Math.max(peak.apiMiB, round(a)) };
    });
  }, 250);
  const run = randomUUID().slice(0, 8);
  const keelCpu0 = { worker: await cpuSeconds(pids.worker), api: await cpuSeconds(pids.api) };
  const t0 = performance.now();
  await pool(conversations, conversations, async (c) => {
    for (let i = 1; i <= turnsEach; i++) {
      const r = await submit(stack, `tp-${run}-${c}`, { text: text(i), messageId: `tp-${run}-${c}-${i}` }, 60);
      if (r.status !== 'replied') throw new Error(`throughput turn ${c}/${i}: ${r.status}`);
    }
  });
  const keelSeconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const keelCpu = {
    worker: (await cpuSeconds(pids.worker)) - keelCpu0.worker,
    api: (await cpuSeconds(pids.api)) - keelCpu0.api,
  };

  const floorCpu0 = await cpuSeconds(pids.floor);
  const t1 = performance.now();
  await pool(conversations, conversations, async (c) => {
    for (let i = 1; i <= turnsEach; i++)
      await client.workflow.executeUpdateWithStart(bareTurn, {
        args: [activitiesPerTurn],
        startWorkflowOperation: floorStart(`tp-floor-${run}-${c}`),
      });
  });
  const floorSeconds = (performance.now() - t1) / 1000;
  const floorCpu = (await cpuSeconds(pids.floor)) - floorCpu0;
  // Where a turn's time goes under load: the histories of a sample of conversations (the first ten of each side).
  const sample = Math.min(10, conversations);
  const sampled = async (id: (c: number) => string) => {
    const sum = emptyBreakdown();
    let turns = 0;
    for (let c = 0; c < sample; c++) {
      for (const runId of await runsOf(client, id(c))) {
        const events = await fetchEvents(client, id(c), runId);
        addBreakdown(sum, breakdownOf(events));
        turns += updatesIn(events);
      }
    }
    return perTurn(sum, turns);
  };
  const keelBreakdown = await sampled((c) => conversationWorkflowId(AGENT, `tp-${run}-${c}`));
  const floorBreakdown = await sampled((c) => `tp-floor-${run}-${c}`);
  await pool(conversations, 10, (c) =>
    client.workflow
      .getHandle(`tp-floor-${run}-${c}`)
      .terminate('bench done')
      .then(() => undefined),
  );
  const turns = conversations * turnsEach;
  return {
    conversations,
    turnsEach,
    keel: {
      seconds: round(keelSeconds, 2),
      turnsPerSecond: round(turns / keelSeconds, 2),
      workerCpuSecondsPerTurn: round(keelCpu.worker / turns, 4),
      apiCpuSecondsPerTurn: round(keelCpu.api / turns, 4),
      breakdownPerTurn: keelBreakdown,
    },
    floor: {
      seconds: round(floorSeconds, 2),
      turnsPerSecond: round(turns / floorSeconds, 2),
      workerCpuSecondsPerTurn: round(floorCpu / turns, 4),
      breakdownPerTurn: floorBreakdown,
    },
    ratio: round(turns / keelSeconds / (turns / floorSeconds), 2),
    memory: peak,
  };
}
