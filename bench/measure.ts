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

/** History size of a workflow id over all its runs (a Keel conversation continues as new). */
export async function historyTotals(client: Client, workflowId: string): Promise<HistoryTotals> {
  const runIds = new Set<string>();
  for await (const w of client.workflow.list({ query: `WorkflowId = "${workflowId}"` })) runIds.add(w.runId);
  // Visibility can lag behind a continue-as-new by a moment: the latest run is asked for directly too.
  runIds.add((await client.workflow.getHandle(workflowId).describe()).runId);
  let bytes = 0;
  let events = 0;
  for (const runId of runIds) {
    const d = await client.workflow.getHandle(workflowId, runId).describe();
    bytes += d.historySize ?? 0;
    events += d.historyLength;
  }
  return { bytes, events, runs: runIds.size };
}

const EventType = temporal.api.enums.v1.EventType;

/** Where the time of a run's turns goes, from its history's timestamps (milliseconds, summed over the run). */
export interface TimeBreakdown {
  workflowTaskQueueMs: number;
  workflowTaskRunMs: number;
  activityQueueMs: number;
  /** Execution time per activity type. */
  activityRunMs: Record<string, number>;
  activities: number;
}

export async function timeBreakdown(client: Client, workflowId: string, runId?: string): Promise<TimeBreakdown> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const ms = (t: temporal.api.history.v1.IHistoryEvent['eventTime']) =>
    Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;
  const byId = new Map<number, temporal.api.history.v1.IHistoryEvent>();
  const out: TimeBreakdown = {
    workflowTaskQueueMs: 0,
    workflowTaskRunMs: 0,
    activityQueueMs: 0,
    activityRunMs: {},
    activities: 0,
  };
  for (const e of history.events ?? []) {
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
    }
  }
  return out;
}

/** Where a run's history bytes go: encoded size per event type (activities by name), summed over the run. */
export async function bytesBreakdown(client: Client, workflowId: string): Promise<Record<string, number>> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const names = new Map<number, string>();
  const out: Record<string, number> = {};
  for (const e of history.events ?? []) {
    const size = temporal.api.history.v1.HistoryEvent.encode(e).finish().length;
    const type = EventType[e.eventType ?? 0]?.replace('EVENT_TYPE_', '').toLowerCase() ?? 'unknown';
    const scheduled = e.activityTaskScheduledEventAttributes?.activityType?.name;
    if (scheduled) names.set(Number(e.eventId), scheduled);
    const activity =
      scheduled ??
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
