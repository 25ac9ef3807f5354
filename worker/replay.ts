import type { Client } from '@temporalio/client';
import { historyFromJSON, historyToJSON, type History } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';
import type { WorkflowSource } from './bundle';

/** The outcome of replaying one history against the current workflow code. */
export interface ReplayOutcome {
  workflowId: string;
  runId: string;
  ok: boolean;
  /** The error's name and message: a determinism violation names the command that no longer matches. */
  error?: string;
}

export interface HistoryRef {
  workflowId: string;
  runId?: string;
  history: History;
}

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
  for await (const h of histories) yield { workflowId: h.workflowId, history: h.history };
}

/** One history from the server (the latest run, or the given one). */
export async function fetchHistory(client: Client, workflowId: string, runId?: string): Promise<HistoryRef> {
  // The run first, then its history: a run that continues as new meanwhile does not mix two runs up.
  const run = runId ?? (await client.workflow.getHandle(workflowId).describe()).runId;
  return { workflowId, runId: run, history: await client.workflow.getHandle(workflowId, run).fetchHistory() };
}

/** Every closed or open run a visibility query finds, with its history. */
export async function* queryHistories(client: Client, query: string): AsyncIterable<HistoryRef> {
  for await (const w of client.workflow.list({ query })) {
    yield {
      workflowId: w.workflowId,
      runId: w.runId,
      history: await client.workflow.getHandle(w.workflowId, w.runId).fetchHistory(),
    };
  }
}

/** A history as the JSON `temporal workflow show -o json` prints, and back. */
export const historyJson = {
  stringify: (h: History) => historyToJSON(h),
  parse: (json: string): History => historyFromJSON(JSON.parse(json) as unknown),
};
