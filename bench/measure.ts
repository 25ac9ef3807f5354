import { readFile } from 'node:fs/promises';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/** Nearest-rank percentile of a sample (p in 0..100). */
export function percentile(sample: readonly number[], p: number): number {
  if (sample.length === 0) return NaN;
  const sorted = [...sample].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

/**
 * A conversation's live events (GET …/events), read as the product's clients read them: `awaitTurn` resolves when
 * `turn.finished` of that turn arrives, which is published right after the turn's end (and reply) is committed.
 */
export class ConversationEvents {
  private readonly waiting = new Map<string, (at: number) => void>();
  private readonly finished = new Map<string, number>();
  private readonly abort = new AbortController();
  private constructor() {}

  static async open(url: string): Promise<ConversationEvents> {
    const events = new ConversationEvents();
    const res = await fetch(url, { signal: events.abort.signal, headers: { accept: 'text/event-stream' } });
    if (!res.ok || !res.body) throw new Error(`events: ${res.status}`);
    void events.read(res.body.getReader());
    return events;
  }

  private async read(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const type = /^event: (.+)$/m.exec(block)?.[1];
          const data = /^data: (.+)$/m.exec(block)?.[1];
          if (type !== 'turn.finished' || !data) continue;
          const { turnId } = JSON.parse(data) as { turnId: string };
          const at = performance.now();
          this.finished.set(turnId, at);
          this.waiting.get(turnId)?.(at);
        }
      }
    } catch {
      // aborted on close
    }
  }

  /** Turns finished since the stream opened (a delegate's relay turn has an id the client never saw). */
  get finishedCount(): number {
    return this.finished.size;
  }

  /** Resolves once `count` turns have finished since the stream opened. */
  async awaitFinishedCount(count: number, timeoutMs = 60_000): Promise<void> {
    for (const deadline = Date.now() + timeoutMs; this.finished.size < count;) {
      if (Date.now() > deadline) throw new Error(`${this.finished.size} of ${count} turns finished in ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The time (performance.now()) at which the turn's `turn.finished` arrived. */
  awaitTurn(turnId: string, timeoutMs = 60_000): Promise<number> {
    const seen = this.finished.get(turnId);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`turn ${turnId} did not finish within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.waiting.set(turnId, (at) => {
        clearTimeout(timer);
        this.waiting.delete(turnId);
        resolve(at);
      });
    });
  }

  close(): void {
    this.abort.abort();
  }
}

export interface HistoryTotals {
  bytes: number;
  events: number;
  runs: number;
}

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const EventType = temporal.api.enums.v1.EventType;

/** The run ids of a workflow id (a Keel conversation continues as new, and starts a new run after it closed idle). */
export async function runsOf(client: Client, workflowId: string): Promise<string[]> {
  const runIds = new Set<string>();
  for await (const w of client.workflow.list({ query: `WorkflowId = "${workflowId}"` })) runIds.add(w.runId);
  // Visibility can lag behind a continue-as-new by a moment: the latest run is asked for directly too.
  runIds.add((await client.workflow.getHandle(workflowId).describe()).runId);
  return [...runIds];
}

/** History size of a workflow id over all its runs. */
export async function historyTotals(client: Client, workflowId: string): Promise<HistoryTotals> {
  const runIds = await runsOf(client, workflowId);
  let bytes = 0;
  let events = 0;
  for (const runId of runIds) {
    const d = await client.workflow.getHandle(workflowId, runId).describe();
    bytes += d.historySize ?? 0;
    events += d.historyLength;
  }
  return { bytes, events, runs: runIds.length };
}

export async function fetchEvents(client: Client, workflowId: string, runId?: string): Promise<HistoryEvent[]> {
  return (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
}

/** Every run a visibility query matches, with its events (one run at a time, so memory stays small). */
export async function* runsMatching(
  client: Client,
  query: string,
): AsyncGenerator<{ workflowId: string; runId: string; events: HistoryEvent[] }> {
  const runs: { workflowId: string; runId: string }[] = [];
  for await (const w of client.workflow.list({ query })) runs.push({ workflowId: w.workflowId, runId: w.runId });
  for (const r of runs) yield { ...r, events: await fetchEvents(client, r.workflowId, r.runId) };
}

/** Messages a run took in: each is one Update (a turn, in the bench's sequential conversations). */
export function updatesIn(events: readonly HistoryEvent[]): number {
  return events.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED).length;
}

/** The local activity a marker records ('?' when unreadable), or undefined for other markers (patches). */
export function markerActivity(e: HistoryEvent): string | undefined {
  const a = e.markerRecordedEventAttributes;
  if (!a || a.markerName !== 'core_local_activity') return undefined;
  const data = a.details?.data?.payloads?.[0]?.data;
  if (!data) return '?';
  try {
    const parsed = JSON.parse(Buffer.from(data).toString('utf8')) as {
      activity_type?: unknown;
      activityType?: unknown;
    };
    const type = parsed.activity_type ?? parsed.activityType;
    return typeof type === 'string' ? type : '?';
  } catch {
    return '?';
  }
}

const ms = (t: HistoryEvent['eventTime']) => Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;

/** Where the time of a run's turns goes, from its history's timestamps (milliseconds, summed over the run). */
export interface TimeBreakdown {
  workflowTaskQueueMs: number;
  /** Includes the local activities, which run inside the workflow task that asks for them. */
  workflowTaskRunMs: number;
  activityQueueMs: number;
  /** Execution time per activity type. */
  activityRunMs: Record<string, number>;
  activities: number;
  /** Local activities by type (a count: their time is part of the workflow task's). */
  localActivities: Record<string, number>;
}

export const emptyBreakdown = (): TimeBreakdown => ({
  workflowTaskQueueMs: 0,
  workflowTaskRunMs: 0,
  activityQueueMs: 0,
  activityRunMs: {},
  activities: 0,
  localActivities: {},
});

/** Adds b (times `sign`) into a: breakdowns of several runs summed, or of a history before a turn subtracted. */
export function addBreakdown(a: TimeBreakdown, b: TimeBreakdown, sign = 1): TimeBreakdown {
  const merge = (x: Record<string, number>, y: Record<string, number>) => {
    for (const [k, v] of Object.entries(y)) x[k] = (x[k] ?? 0) + sign * v;
  };
  a.workflowTaskQueueMs += sign * b.workflowTaskQueueMs;
  a.workflowTaskRunMs += sign * b.workflowTaskRunMs;
  a.activityQueueMs += sign * b.activityQueueMs;
  a.activities += sign * b.activities;
  merge(a.activityRunMs, b.activityRunMs);
  merge(a.localActivities, b.localActivities);
  return a;
}

/** A breakdown divided by the turns it covers, rounded for the report. */
export function perTurn(b: TimeBreakdown, turns: number) {
  const t = Math.max(1, turns);
  // Types a subtraction left at zero (the same steps before and after a turn) are not the turn's.
  const each = (r: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(r)
        .map(([k, v]) => [k, round(v / t, 2)] as const)
        .filter(([, v]) => v !== 0),
    );
  return {
    workflowTaskQueueMs: round(b.workflowTaskQueueMs / t, 2),
    workflowTaskRunMs: round(b.workflowTaskRunMs / t, 2),
    activityQueueMs: round(b.activityQueueMs / t, 2),
    activityRunMs: each(b.activityRunMs),
    localActivities: each(b.localActivities),
  };
}
export type BreakdownPerTurn = ReturnType<typeof perTurn>;

export function breakdownOf(events: readonly HistoryEvent[]): TimeBreakdown {
  const byId = new Map<number, HistoryEvent>();
  const out = emptyBreakdown();
  for (const e of events) {
    byId.set(Number(e.eventId), e);
    switch (e.eventType) {
      case EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED: {
        const scheduled = byId.get(Number(e.workflowTaskStartedEventAttributes?.scheduledEventId));
        if (scheduled) out.workflowTaskQueueMs += ms(e.eventTime) - ms(scheduled.eventTime);
        break;
      }
      case EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: {
        const started = byId.get(Number(e.workflowTaskCompletedEventAttributes?.startedEventId));
        if (started) out.workflowTaskRunMs += ms(e.eventTime) - ms(started.eventTime);
        break;
      }
      case EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: {
        const a = e.activityTaskCompletedEventAttributes;
        const scheduled = byId.get(Number(a?.scheduledEventId));
        const started = byId.get(Number(a?.startedEventId));
        if (!scheduled || !started) break;
        const type = scheduled.activityTaskScheduledEventAttributes?.activityType?.name ?? '?';
        out.activities++;
        // An activity's Started event is written when it completes, with the time its attempt began.
        out.activityQueueMs += ms(started.eventTime) - ms(scheduled.eventTime);
        out.activityRunMs[type] = (out.activityRunMs[type] ?? 0) + ms(e.eventTime) - ms(started.eventTime);
        break;
      }
      case EventType.EVENT_TYPE_MARKER_RECORDED: {
        const type = markerActivity(e);
        if (type) out.localActivities[type] = (out.localActivities[type] ?? 0) + 1;
        break;
      }
    }
  }
  return out;
}

export async function timeBreakdown(client: Client, workflowId: string, runId?: string): Promise<TimeBreakdown> {
  return breakdownOf(await fetchEvents(client, workflowId, runId));
}

/** Where a run's history bytes go: encoded size per event type (activities by name), summed over the run. */
export function bytesOf(events: readonly HistoryEvent[]): Record<string, number> {
  const names = new Map<number, string>();
  const out: Record<string, number> = {};
  for (const e of events) {
    const size = temporal.api.history.v1.HistoryEvent.encode(e).finish().length;
    const type = EventType[e.eventType ?? 0]?.replace('EVENT_TYPE_', '').toLowerCase() ?? 'unknown';
    const scheduled = e.activityTaskScheduledEventAttributes?.activityType?.name;
    if (scheduled) names.set(Number(e.eventId), scheduled);
    const activity =
      scheduled ??
      markerActivity(e) ??
      names.get(
        Number(
          e.activityTaskStartedEventAttributes?.scheduledEventId ??
            e.activityTaskCompletedEventAttributes?.scheduledEventId ??
            e.activityTaskFailedEventAttributes?.scheduledEventId ??
            0,
        ),
      );
    const key = activity ? `${type} (${activity})` : type;
    out[key] = (out[key] ?? 0) + size;
  }
  return out;
}

export async function bytesBreakdown(
  client: Client,
  workflowId: string,
  runId?: string,
): Promise<Record<string, number>> {
  return bytesOf(await fetchEvents(client, workflowId, runId));
}

/** Resident memory of a process split by kind (MiB, from /proc, Linux): anonymous is the heap's share. */
export async function processMemory(pid: number): Promise<{ rssMiB: number; anonMiB: number; fileMiB: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const mib = (field: string) => round(Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024);
  return { rssMiB: mib('VmRSS'), anonMiB: mib('RssAnon'), fileMiB: mib('RssFile') };
}

/** A gauge from a Prometheus text endpoint (the worker's Temporal metrics), summed over its labels; null if absent. */
export async function scrapeGauge(url: string, name: string): Promise<number | null> {
  try {
    const text = await (await fetch(url)).text();
    const values = text
      .split('\n')
      .filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
      .map((l) => Number(l.slice(l.lastIndexOf(' ') + 1)));
    return values.length ? values.reduce((a, b) => a + b, 0) : null;
  } catch {
    return null;
  }
}
