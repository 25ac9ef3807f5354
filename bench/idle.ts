/**
 * Idle conversations: many one-turn conversations, then nothing. What they cost the worker and the API while they
 * arrive and after they have idled, whether Temporal still runs their workflows, and what the first turn of an idle
 * conversation costs against a turn of a conversation whose workflow is still open.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { conversationWorkflowId } from '../domain/ids';
import type { KeelStack } from '../scripts/keel-stack';
import { actionsMatching, actionsPer } from './actions';
import { AGENT, eventsOf, pool, sleep, submit, timedTurn } from './drive';
import {
  addBreakdown,
  breakdownOf,
  emptyBreakdown,
  fetchEvents,
  historyTotals,
  percentile,
  perTurn,
  processMemory,
  round,
  scrapeGauge,
} from './measure';

export interface IdleOptions {
  conversations: number;
  /** The earlier count at which memory is read too (1,000 at full scale): flat means the same at both. */
  checkpoint: number;
  concurrency: number;
  /** KEEL_CONVERSATION_IDLE_MS of the stack. */
  idleMs: number;
  /** How long past the idle time the bench waits for the running count to reach 0 before it gives up. */
  graceMs: number;
  /** Generation stops when the worker grows beyond this (a worker that keeps every conversation would fill RAM). */
  maxWorkerMiB: number;
  /** Idle conversations woken one at a time, each followed by a second (warm) message. */
  woken: number;
  /** The worker's Prometheus endpoint (its sticky cache size), when it has one. */
  workerMetrics?: string;
}

const RUNNING = `KeelKind = "conversation" AND ExecutionStatus = "Running"`;

export async function idleConversations(
  stack: KeelStack,
  client: Client,
  pids: { worker: number; api: number },
  o: IdleOptions,
) {
  const run = randomUUID().slice(0, 8);
  const idOf = (c: number) => `idle-${run}-${c}`;
  const running = async () => (await client.workflow.count(RUNNING)).count;
  const snapshot = async (conversations: number) => ({
    conversations,
    worker: await processMemory(pids.worker),
    api: await processMemory(pids.api),
    runningConversations: await running(),
    stickyCache: o.workerMetrics ? await scrapeGauge(o.workerMetrics, 'temporal_sticky_cache_size') : null,
  });

  let done = 0;
  /** The conversations whose turn was answered, in the order they were: the later scenes pick from them. */
  const replied: number[] = [];
  let failed = 0;
  /** Why generation stopped early: the worker's memory, or too many failed turns. */
  let stop: { at: number; workerMiB: number; reason: 'memory' | 'failed turns' } | undefined;
  let atCheckpoint: Promise<Awaited<ReturnType<typeof snapshot>>> | undefined;
  let peak = { workerMiB: 0, apiMiB: 0 };
  const t0 = Date.now();
  const ticker = setInterval(() => {
    void Promise.all([processMemory(pids.worker), processMemory(pids.api)]).then(([w, a]) => {
      peak = { workerMiB: Math.max(peak.workerMiB, w.rssMiB), apiMiB: Math.max(peak.apiMiB, a.rssMiB) };
      if (w.rssMiB > o.maxWorkerMiB && !stop) stop = { at: done, workerMiB: w.rssMiB, reason: 'memory' };
    });
  }, 1_000);
  const progress = setInterval(() => {
    const s = (Date.now() - t0) / 1000;
    console.log(
      `bench: idle ${done}/${o.conversations} conversations in ${s.toFixed(0)} s ` +
        `(${(done / s).toFixed(1)}/s), worker ${peak.workerMiB} MiB peak`,
    );
  }, 15_000);
  try {
    await pool(o.conversations, o.concurrency, async (c) => {
      if (stop) return;
      // One failed turn does not end a long run; many do (the report then shows where it stopped).
      const r = await submit(stack, idOf(c), { text: 'hello', messageId: idOf(c) }, 60).catch((err: unknown) => {
        console.error(`bench: idle conversation ${c}:`, err);
        return { status: 'failed' };
      });
      if (r.status === 'replied') replied.push(c);
      else if (++failed > 10 + o.conversations / 100)
        stop ??= { at: done, workerMiB: peak.workerMiB, reason: 'failed turns' };
      if (++done === o.checkpoint) atCheckpoint = snapshot(done);
    });
  } finally {
    clearInterval(ticker);
    clearInterval(progress);
  }
  const generatedSeconds = (Date.now() - t0) / 1000;
  const atEnd = await snapshot(done);
  console.log(`bench: idle ${done} conversations in ${generatedSeconds.toFixed(0)} s; waiting for them to close`);

  // Idling: Temporal's count of running conversation workflows, every 5 s, until 0 or the idle time and a grace.
  const idleStart = Date.now();
  const counts: { afterS: number; running: number }[] = [];
  for (const deadline = idleStart + o.idleMs + o.graceMs; ; await sleep(5_000)) {
    const n = await running();
    counts.push({ afterS: round((Date.now() - idleStart) / 1000), running: n });
    if (n === 0 || Date.now() > deadline) break;
  }
  const last = counts[counts.length - 1]!;
  const afterIdle = await snapshot(done);
  console.log(`bench: idle: ${last.running} conversations still running ${last.afterS} s after the last turn`);

  // One-turn conversations that closed: what one costs in actions and history (a sample of twenty).
  const sample = replied.slice(-20).map(idOf);
  const ids = sample.map((c) => `"${conversationWorkflowId(AGENT, c)}"`).join(', ');
  const sampled = await actionsMatching(client, `WorkflowId IN (${ids})`);
  let sampledBytes = 0;
  for (const c of sample) sampledBytes += (await historyTotals(client, conversationWorkflowId(AGENT, c))).bytes;

  // Woken against warm: a message to an idle conversation (its workflow closed, if Keel closes it), then at once a
  // second one (its workflow now open), each timed from the POST to its `turn.finished`.
  const wokenMs: number[] = [];
  const warmMs: number[] = [];
  let fromClosed = 0;
  const woken = emptyBreakdown();
  const warm = emptyBreakdown();
  const wakeable = replied.slice(0, -20);
  const count = Math.min(o.woken, wakeable.length);
  for (let k = 0; k < count; k++) {
    const conversationId = idOf(wakeable[Math.floor((k * wakeable.length) / count)]!);
    const workflowId = conversationWorkflowId(AGENT, conversationId);
    const handle = client.workflow.getHandle(workflowId);
    const was = await handle.describe();
    // A run still open (Keel did not close it) already holds the first turn: only what the woken turn adds counts.
    const open = was.status.name === 'RUNNING';
    if (!open) fromClosed++;
    const before = open ? breakdownOf(await fetchEvents(client, workflowId, was.runId)) : emptyBreakdown();
    const events = await eventsOf(stack, conversationId);
    try {
      wokenMs.push(await timedTurn(stack, events, conversationId, `${conversationId}-woken`, 2));
      const now = await handle.describe();
      const first = breakdownOf(await fetchEvents(client, workflowId, now.runId));
      if (now.runId === was.runId) addBreakdown(first, before, -1);
      warmMs.push(await timedTurn(stack, events, conversationId, `${conversationId}-warm`, 3));
      const both = breakdownOf(await fetchEvents(client, workflowId, now.runId));
      if (now.runId === was.runId) addBreakdown(both, before, -1);
      addBreakdown(woken, first);
      addBreakdown(warm, addBreakdown(both, first, -1));
    } finally {
      events.close();
    }
  }
  const stats = (s: number[]) => ({
    p50Ms: round(percentile(s, 50)),
    p95Ms: round(percentile(s, 95)),
    meanMs: round(s.reduce((a, b) => a + b, 0) / Math.max(1, s.length)),
  });
  return {
    conversations: o.conversations,
    generated: done,
    failedTurns: failed,
    concurrency: o.concurrency,
    generatedSeconds: round(generatedSeconds),
    turnsPerSecond: round(done / generatedSeconds, 2),
    stoppedEarly: stop ?? null,
    idleMs: o.idleMs,
    peak,
    atCheckpoint: (await atCheckpoint) ?? null,
    atEnd,
    afterIdle,
    idling: {
      runningAtEnd: atEnd.runningConversations,
      running: last.running,
      waitedSeconds: last.afterS,
      closed: last.running === 0,
      counts,
    },
    oneTurnConversation: {
      sampled: sample.length,
      runs: sampled.runs,
      actions: actionsPer(sampled.actions, sample.length),
      historyBytes: round(sampledBytes / Math.max(1, sample.length)),
    },
    firstTurnAfterIdle: {
      conversations: count,
      fromClosed,
      woken: { ...stats(wokenMs), breakdownPerTurn: perTurn(woken, count) },
      warm: { ...stats(warmMs), breakdownPerTurn: perTurn(warm, count) },
      ratioP50: round(percentile(wokenMs, 50) / percentile(warmMs, 50), 2),
    },
  };
}
