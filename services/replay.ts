import type { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { ReplayOutcome, ReplayRunInput } from '../contracts/replay-run';
import { fetchHistory, type HistoryRef } from './run-history';

export type { ReplayOutcome };

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
  for await (const h of histories) yield { workflowId: h.workflowId, history: h.history };
}

/** One run of the server replayed against `workflows`: what the replay step of a worker does. */
export async function replayRun(
  client: Client,
  workflows: WorkflowSource,
  run: ReplayRunInput,
): Promise<ReplayOutcome> {
  const [outcome] = await replayHistories(workflows, [await fetchHistory(client, run.workflowId, run.runId)]);
  return outcome ?? { ...run, ok: false, error: 'the replayer returned no outcome' };
}
