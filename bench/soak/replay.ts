import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { History } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { replayHistories, type ReplayOutcome } from '../../services/replay';
import { historyJson, queryHistories } from '../../services/run-history';
import { temporalUnavailable } from '../../services/temporal-status';
import type { CheckRow } from './checks';

/** A history that the current workflow code does not replay: the run, and the first event where they part. */
export interface ReplayFailure {
  workflowId: string;
  runId: string;
  workflowType: string;
  /** The first history event the code did not reproduce, as the determinism error names it (`id: 18, …`). */
  firstDifference: string;
  error: string;
  /** Where its history was kept (the stack's data goes with it). */
  file: string;
}

export interface ReplayCheck {
  row: CheckRow;
  replayed: number;
  byType: Record<string, number>;
  failures: ReplayFailure[];
  seconds: number;
}

/** `HistoryEvent(id: 18, WorkflowExecutionUpdateCompleted)` in a determinism error: where replay and history part. */
export function firstDifference(error: string): string {
  const m = /HistoryEvent\(id: (\d+),\s*([^)]*)\)/.exec(error);
  if (m) return `event ${m[1]} (${m[2]!.replace(/^Some\(|\)$/g, '')})`;
  const seq = /(marker|command)[^.]*?'([^']+)'/i.exec(error);
  return seq ? `${seq[1]} ${seq[2]}` : 'not named by the error';
}

/**
 * Check (f): every workflow history the soak produced, open and closed, of every type, replays against the workflow
 * code the soak's workers ran (its bundle). A nondeterminism error is a failure of its own, naming the workflow and
 * the first differing event, whether or not the run got stuck: a worker that kept the run cached never replayed it.
 */
export async function replayEverything(client: Client, bundlePath: string, keepDir: string): Promise<ReplayCheck> {
  // A server just restarted and drained can refuse reads for a while (a cluster's "System Persistence Max QPS
  // Reached"): that is the server's answer to this check's own reads, not a history that does not replay.
  for (let tries = 1; ; tries++) {
    try {
      return await replayOnce(client, bundlePath, keepDir);
    } catch (err) {
      if (tries >= READ_TRIES || !temporalUnavailable(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, READ_RETRY_MS));
    }
  }
}

const READ_TRIES = 5;
const READ_RETRY_MS = 5_000;

async function replayOnce(client: Client, bundlePath: string, keepDir: string): Promise<ReplayCheck> {
  const started = Date.now();
  // Replaying an open run ends in a live activation whose local activities the replayer cannot run: the SDK warns of
  // each (and reports the replay clean). Only errors are worth a line here.
  try {
    Runtime.install({ logger: new DefaultLogger('ERROR') });
  } catch {
    // Already installed by this process.
  }
  const types = new Map<string, string>();
  const kept = new Map<string, History>();
  const byType: Record<string, number> = {};
  async function* histories() {
    for await (const h of queryHistories(client, '')) {
      const type = h.history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? 'unknown';
      types.set(`${h.workflowId}/${h.runId ?? ''}`, type);
      kept.set(`${h.workflowId}/${h.runId ?? ''}`, h.history);
      byType[type] = (byType[type] ?? 0) + 1;
      yield h;
    }
  }
  const outcomes: ReplayOutcome[] = await replayHistories({ workflowBundle: { codePath: bundlePath } }, histories());
  const failures: ReplayFailure[] = [];
  for (const o of outcomes.filter((x) => !x.ok)) {
    const key = `${o.workflowId}/${o.runId}`;
    const file = path.join(keepDir, `${o.workflowId.replace(/[^\w.-]+/g, '_')}-${o.runId}.json`);
    const history = kept.get(key);
    if (history) {
      await mkdir(keepDir, { recursive: true });
      await writeFile(file, historyJson.stringify(history));
    }
    failures.push({
      workflowId: o.workflowId,
      runId: o.runId,
      workflowType: types.get(key) ?? 'unknown',
      firstDifference: firstDifference(o.error ?? ''),
      error: (o.error ?? '').slice(0, 600),
      file: history ? file : '(not fetched)',
    });
  }
  const kinds = Object.entries(byType)
    .map(([t, n]) => `${n} ${t}`)
    .join(', ');
  return {
    row: {
      check: '(f) every history replays',
      expected: 'every run, open and closed, replays against the code the workers ran',
      observed: `${outcomes.length - failures.length} of ${outcomes.length} replayed (${kinds || 'none'})`,
      lost: 0,
      duplicated: 0,
    },
    replayed: outcomes.length,
    byType,
    failures,
    seconds: Math.round((Date.now() - started) / 100) / 10,
  };
}

/** The report's section for check (f): how much was replayed, and each history that does not replay. */
export function replaySection(r: ReplayCheck): string[] {
  const lines = [
    '## Every history replays (check f)',
    '',
    `${r.replayed} histories (${Object.entries(r.byType)
      .map(([t, n]) => `${n} ${t}`)
      .join(', ')}) replayed against the workers' workflow bundle in ${r.seconds} s: ` +
      `${r.failures.length ? `**${r.failures.length} failed**` : 'all cleanly'}.`,
    '',
  ];
  if (!r.failures.length) return lines;
  lines.push(
    '| workflow | run | type | first differing event | error | history |',
    '| --- | --- | --- | --- | --- | --- |',
  );
  for (const f of r.failures) {
    const error = f.error.replace(/\|/g, '\\|').replace(/\s+/g, ' ').slice(0, 300);
    lines.push(`| ${f.workflowId} | ${f.runId} | ${f.workflowType} | ${f.firstDifference} | ${error} | ${f.file} |`);
  }
  lines.push('', 'Replay one again with `npm run replay -- --file <history>` (docs/operators.md).', '');
  return lines;
}
