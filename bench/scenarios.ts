/**
 * The scenarios `npm run bench` measures (bench/run.ts runs them in turn): each drives Keel through its API and the
 * baseline workflows through Temporal, and returns its figures for the report.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import type pg from 'pg';
import { conversationWorkflowId } from '../domain/ids';
import { cpuSeconds, rssMiB, type KeelStack } from '../scripts/keel-stack';
import { freePort } from '../scripts/ports';
import { bareTurn, say } from './baseline-workflows';
import {
  bytesBreakdown,
  ConversationEvents,
  historyTotals,
  percentile,
  round,
  timeBreakdown,
  type HistoryTotals,
  type TimeBreakdown,
} from './measure';

/** The task queue of the bench's own worker, which runs the baseline workflows. */
export const BENCH_QUEUE = 'bench';
const AGENT = 'bench';
/** A realistic user message (~100 bytes), the same for Keel and the baseline. */
const text = (i: number) =>
  `Turn ${i}: please summarise the latest figures for the quarterly report and flag anything unusual.`;
const MIB = 1024 * 1024;

/** POST a message without waiting; the time is taken from the conversation's own `turn.finished` event. */
async function submit(
  stack: KeelStack,
  conversationId: string,
  body: Record<string, unknown>,
  wait = 0,
): Promise<{ turnId: string; status: string }> {
  for (;;) {
    const res = await fetch(
      `${stack.api}/v1/agents/${AGENT}/conversations/${conversationId}/messages${wait ? `?wait=${wait}` : ''}`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      },
    );
    if (res.status === 503) continue; // the worker was busy beyond the API's deadline: the messageId makes a retry safe
    if (!res.ok) throw new Error(`submit ${conversationId}: ${res.status} ${await res.text()}`);
    return (await res.json()) as { turnId: string; status: string };
  }
}

/** Sequential turns of one Keel conversation, each timed from the POST to its `turn.finished` event. */
async function keelTurns(
  stack: KeelStack,
  conversationId: string,
  count: number,
  each?: (turn: number) => Promise<void>,
): Promise<number[]> {
  const events = await ConversationEvents.open(
    `${stack.api}/v1/agents/${AGENT}/conversations/${conversationId}/events`,
  );
  const latencies: number[] = [];
  try {
    for (let i = 1; i <= count; i++) {
      const t0 = performance.now();
      const { turnId } = await submit(stack, conversationId, { text: text(i), messageId: `${conversationId}-${i}` });
      latencies.push((await events.awaitTurn(turnId)) - t0);
      await each?.(i);
    }
  } finally {
    events.close();
  }
  return latencies;
}

const floorStart = (workflowId: string) =>
  new WithStartWorkflowOperation('bareConversation', {
    workflowId,
    taskQueue: BENCH_QUEUE,
    workflowIdConflictPolicy: 'USE_EXISTING',
  });

export async function turnOverhead(stack: KeelStack, client: Client, turns: number) {
  // Keel's activities per turn, counted in a warm-up conversation's history, set the floor's length.
  const warmup = `warmup-${randomUUID().slice(0, 8)}`;
  await keelTurns(stack, warmup, 6);
  const activitiesPerTurn = await activitiesPerKeelTurn(client, conversationWorkflowId(AGENT, warmup));

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
  const keelBreakdown = await timeBreakdown(client, workflowId);
  const keelRunTurns = await turnsInLatestRun(client, workflowId, turns);
  const floorBreakdown = await timeBreakdown(client, floorId);
  await client.workflow.getHandle(floorId).terminate('bench done');
  const stats = (s: number[]) => ({
    p50Ms: round(percentile(s, 50)),
    p95Ms: round(percentile(s, 95)),
    meanMs: round(s.reduce((a, b) => a + b, 0) / s.length),
  });
  const perTurn = (b: TimeBreakdown, t: number) => ({
    workflowTaskQueueMs: round(b.workflowTaskQueueMs / t, 2),
    workflowTaskRunMs: round(b.workflowTaskRunMs / t, 2),
    activityQueueMs: round(b.activityQueueMs / t, 2),
    activityRunMs: Object.fromEntries(Object.entries(b.activityRunMs).map(([k, v]) => [k, round(v / t, 2)])),
  });
  return {
    turns,
    activitiesPerTurn,
    keel: { ...stats(keel), historyRuns: keelHistory.runs, breakdownPerTurn: perTurn(keelBreakdown, keelRunTurns) },
    floor: { ...stats(floor), breakdownPerTurn: perTurn(floorBreakdown, turns) },
    ratioP50: round(percentile(keel, 50) / percentile(floor, 50), 2),
  };
}

/** Activities a Keel turn schedules: those after the first turn's end, per later turn (not the run's start-up ones). */
async function activitiesPerKeelTurn(client: Client, workflowId: string): Promise<number> {
  const names = ((await client.workflow.getHandle(workflowId).fetchHistory()).events ?? []).flatMap(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? [],
  );
  const first = names.indexOf('finishTurn');
  const later = names.slice(first + 1);
  return Math.round(later.length / Math.max(1, later.filter((n) => n === 'finishTurn').length));
}

/** Turns in the latest run of a conversation: its breakdown covers only that run's history. */
async function turnsInLatestRun(client: Client, workflowId: string, total: number): Promise<number> {
  const h = await client.workflow.getHandle(workflowId).fetchHistory();
  const finished = (h.events ?? []).filter(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'finishTurn',
  ).length;
  return Math.max(1, Math.min(total, finished));
}

export async function historyGrowth(stack: KeelStack, client: Client, turns: number) {
  const checkpoints = [
    ...new Set([1, 10, 20, 90, 100, 110, turns - 10, turns].filter((t) => t >= 1 && t <= turns)),
  ].sort((a, b) => a - b);
  const conversationId = `history-${randomUUID().slice(0, 8)}`;
  const keelAt: (HistoryTotals & { turn: number })[] = [];
  await keelTurns(stack, conversationId, turns, async (turn) => {
    if (checkpoints.includes(turn))
      keelAt.push({ turn, ...(await historyTotals(client, conversationWorkflowId(AGENT, conversationId))) });
  });
  const baselineId = `baseline-${randomUUID().slice(0, 8)}`;
  const handle = await client.workflow.start('transcriptInHistoryConversation', {
    workflowId: baselineId,
    taskQueue: BENCH_QUEUE,
  });
  const baselineAt: (HistoryTotals & { turn: number })[] = [];
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
  const perTurn = (at: (HistoryTotals & { turn: number })[], from: number, to: number) => {
    const a = at.find((x) => x.turn === from);
    const b = at.find((x) => x.turn === to);
    return a && b && to > from ? round((b.bytes - a.bytes) / (to - from)) : NaN;
  };
  const keelPerTurn = {
    at10: perTurn(keelAt, 10, 20),
    at100: perTurn(keelAt, 90, 110),
    atLast: perTurn(keelAt, turns - 10, turns),
  };
  // The baseline's last slope: around the last turn, or between its last two checkpoints when Temporal ended it early.
  const [penultimate, last] = baselineAt.slice(-2);
  const baselineLast = perTurn(baselineAt, turns - 10, turns);
  const baselinePerTurn = {
    at10: perTurn(baselineAt, 10, 20),
    at100: perTurn(baselineAt, 90, 110),
    atLast:
      Number.isNaN(baselineLast) && penultimate && last
        ? perTurn(baselineAt, penultimate.turn, last.turn)
        : baselineLast,
    lastTurn: Number.isNaN(baselineLast) && penultimate && last ? (penultimate.turn + last.turn) / 2 : turns - 5,
  };
  // The baseline adds a fixed part plus the whole transcript each turn: bytes per turn grow linearly, so its total
  // is quadratic; fitted from the two measured slopes, the turn at which it crosses Temporal's 50 MiB limit follows.
  const slope = (baselinePerTurn.atLast - baselinePerTurn.at100) / (baselinePerTurn.lastTurn - 100);
  const intercept = baselinePerTurn.at100 - slope * 100;
  let total = last?.bytes ?? 0;
  let crossing = last?.turn ?? 0;
  while (total < 50 * MIB && crossing < 1_000_000 && slope > 0) total += intercept + slope * ++crossing;
  // Where Keel's bytes go: the latest run's history by event type, per turn of that run.
  const keelId = conversationWorkflowId(AGENT, conversationId);
  const runTurns = await turnsInLatestRun(client, keelId, turns);
  const keelBytesPerTurnByEvent = Object.fromEntries(
    Object.entries(await bytesBreakdown(client, keelId))
      .map(([k, v]) => [k, round(v / runTurns)] as const)
      .sort((a, b) => b[1] - a[1]),
  );
  // The turn from which Keel's bytes per turn are 1/20 of the baseline's (the baseline's grow with the transcript).
  const oneTwentiethAtTurn = slope > 0 ? Math.max(1, Math.ceil((20 * keelPerTurn.at100 - intercept) / slope)) : null;
  const keelValues = [keelPerTurn.at10, keelPerTurn.at100, keelPerTurn.atLast];
  const spread = (Math.max(...keelValues) - Math.min(...keelValues)) / Math.min(...keelValues);
  return {
    turns,
    messageBytes: Buffer.byteLength(text(1)),
    keel: {
      at: keelAt,
      bytesPerTurn: keelPerTurn,
      spread: round(spread, 3),
      bytesPerTurnByEvent: keelBytesPerTurnByEvent,
    },
    baseline: {
      at: baselineAt,
      bytesPerTurn: baselinePerTurn,
      crosses50MiBAtTurn: slope > 0 ? crossing : null,
      keelAtOneTwentiethFromTurn: oneTwentiethAtTurn,
      endedByTemporal: baselineEnded ?? null,
    },
    ratioAt100: round(keelPerTurn.at100 / baselinePerTurn.at100, 4),
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
  await Promise.all(
    Array.from({ length: conversations }, async (_, c) => {
      for (let i = 1; i <= turnsEach; i++) {
        const r = await submit(stack, `tp-${run}-${c}`, { text: text(i), messageId: `tp-${run}-${c}-${i}` }, 60);
        if (r.status !== 'replied') throw new Error(`throughput turn ${c}/${i}: ${r.status}`);
      }
    }),
  );
  const keelSeconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const keelCpu = {
    worker: (await cpuSeconds(pids.worker)) - keelCpu0.worker,
    api: (await cpuSeconds(pids.api)) - keelCpu0.api,
  };

  const floorCpu0 = await cpuSeconds(pids.floor);
  const t1 = performance.now();
  await Promise.all(
    Array.from({ length: conversations }, async (_, c) => {
      for (let i = 1; i <= turnsEach; i++)
        await client.workflow.executeUpdateWithStart(bareTurn, {
          args: [activitiesPerTurn],
          startWorkflowOperation: floorStart(`tp-floor-${run}-${c}`),
        });
    }),
  );
  const floorSeconds = (performance.now() - t1) / 1000;
  const floorCpu = (await cpuSeconds(pids.floor)) - floorCpu0;
  await Promise.all(
    Array.from({ length: conversations }, (_, c) =>
      client.workflow.getHandle(`tp-floor-${run}-${c}`).terminate('bench done'),
    ),
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
    },
    floor: {
      seconds: round(floorSeconds, 2),
      turnsPerSecond: round(turns / floorSeconds, 2),
      workerCpuSecondsPerTurn: round(floorCpu / turns, 4),
    },
    ratio: round(turns / keelSeconds / (turns / floorSeconds), 2),
    memory: peak,
  };
}

/** 1,000 conversations with one turn each, then left at rest: what open conversations cost the worker and the API. */
export async function openConversations(stack: KeelStack, pids: { worker: number; api: number }, count: number) {
  const run = randomUUID().slice(0, 8);
  let next = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < count) {
        const c = next++;
        await submit(stack, `rest-${run}-${c}`, { text: 'hello', messageId: `rest-${run}-${c}` }, 60);
      }
    }),
  );
  // At rest: the last turns' activities have returned; give the processes' allocators a moment, then read.
  await new Promise((r) => setTimeout(r, 3_000));
  return { conversations: count, workerMiB: round(await rssMiB(pids.worker)), apiMiB: round(await rssMiB(pids.api)) };
}

export async function schedulesRun(stack: KeelStack, client: Client, db: pg.Pool, jobs: number) {
  const arrivals: number[] = [];
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.push(Date.now());
      res.writeHead(200).end();
    });
  });
  const port = await freePort();
  await new Promise<void>((r) => receiver.listen(port, '127.0.0.1', r));
  const agent = `bench-jobs-${randomUUID().slice(0, 8)}`;
  try {
    // Every job is due at the same instant: the next whole minute at least 40 s away (time to create them all).
    const due = Math.ceil((Date.now() + 40_000) / 60_000) * 60_000;
    for (let i = 0; i < jobs; i++) {
      const res = await fetch(`${stack.api}/v1/agents/${agent}/jobs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          name: `report ${i}`,
          schedule: { kind: 'at', at: new Date(due).toISOString() },
          task: `report ${i}`,
          delivery: { channel: 'webhook', url: `http://127.0.0.1:${port}/hook` },
        }),
      });
      if (res.status !== 201) throw new Error(`job ${i}: ${res.status} ${await res.text()}`);
    }
    const deadline = due + 10 * 60_000;
    while (arrivals.length < jobs && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    if (arrivals.length < jobs) throw new Error(`only ${arrivals.length} of ${jobs} job deliveries arrived`);
    const starts: number[] = [];
    for await (const w of client.workflow.list({ query: `KeelKind = "job" AND KeelAgentId = "${agent}"` }))
      starts.push(w.startTime.getTime() - due);
    const { rows } = await db.query<{ ms: number }>(
      `SELECT EXTRACT(EPOCH FROM (r.finished_at - r.fired_at)) * 1000 AS ms
       FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.agent_id = $1 AND r.status = 'ok'`,
      [agent],
    );
    const runMs = rows.map((r) => Number(r.ms));
    const meanRunMs = runMs.reduce((a, b) => a + b, 0) / Math.max(1, runMs.length);
    return {
      jobs,
      delayMs: {
        p50: round(percentile(starts, 50)),
        p99: round(percentile(starts, 99)),
        max: round(Math.max(...starts)),
      },
      allDeliveredAfterMs: round(Math.max(...arrivals) - due),
      meanRunMs: round(meanRunMs),
      // Phantom runs due jobs one at a time in a single slot: the last of them starts after all the others ran.
      oneSlotAllDoneMs: round(meanRunMs * jobs),
    };
  } finally {
    receiver.close();
  }
}
