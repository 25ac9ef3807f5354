import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import type { ReplayOutcome, ReplayRunInput } from '../contracts/replay-run';
import { fetchHistory, type HistoryRef } from './run-history';

export type { ReplayOutcome };

const { EventType } = temporal.api.enums.v1;

/** Where a worker or a replayer gets its workflow code: a prebuilt bundle (tests build one per run) or the sources. */
export type WorkflowSource = { workflowBundle: { codePath: string } | { code: string } } | { workflowsPath: string };

/** Replays histories against `workflows`, one result each, in order; never throws for a history that fails. */
export async function replayHistories(
  workflows: WorkflowSource,
  histories: Iterable<HistoryRef> | AsyncIterable<HistoryRef>,
): Promise<ReplayOutcome[]> {
  const outcomes: ReplayOutcome[] = [];
  // The replayer reports the workflow id; the run id is remembered here from what it was given.
  const runIds = new Map<string, string | undefined>();
  async function* remember() {
    for await (const h of histories) {
      runIds.set(h.workflowId, h.runId);
      yield h;
    }
  }
  for await (const r of Worker.runReplayHistories(workflows, replayInput(remember()))) {
    outcomes.push({
      workflowId: r.workflowId,
      runId: r.runId || runIds.get(r.workflowId) || '',
      ok: !r.error,
      ...(r.error ? { error: `${r.error.name}: ${r.error.message}` } : {}),
    });
  }
  return outcomes;
}

async function* replayInput(histories: AsyncIterable<HistoryRef>) {
  for await (const h of histories) yield { workflowId: h.workflowId, history: throughLastCompletedTask(h.history) };
}

/**
 * What the run did, through its last completed workflow task and what its commands recorded. A running conversation's
 * history may end inside a task (a turn's local steps run in one) or with a message that no task has taken yet: the
 * replayer would run those live and fail them for the local activities it cannot run, which the worker's failed-task
 * record would then count against the run.
 */
function throughLastCompletedTask(history: HistoryRef['history']): HistoryRef['history'] {
  const events = history.events ?? [];
  let lastCompleted = -1;
  events.forEach((e, i) => {
    if (e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) lastCompleted = i;
  });
  if (lastCompleted < 0) return history;
  const end = events.findIndex((e, i) => i > lastCompleted && !COMMAND_EVENTS.has(e.eventType ?? 0));
  return end < 0 ? history : { ...history, events: events.slice(0, end) };
}

/** The events a workflow task's commands record right after its completion. */
const COMMAND_EVENTS = new Set<number>([
  EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
  EventType.EVENT_TYPE_TIMER_STARTED,
  EventType.EVENT_TYPE_TIMER_CANCELED,
  EventType.EVENT_TYPE_MARKER_RECORDED,
  EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
  EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
  EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED,
  EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
  EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
  EventType.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
]);

/** One run of the server replayed against `workflows`: what the replay step of a worker does. */
export async function replayRun(
  client: Client,
  workflows: WorkflowSource,
  run: ReplayRunInput,
): Promise<ReplayOutcome> {
  const [outcome] = await replayHistories(workflows, [await fetchHistory(client, run.workflowId, run.runId)]);
  return outcome ?? { ...run, ok: false, error: 'the replayer returned no outcome' };
}
