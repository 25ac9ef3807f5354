import { randomUUID } from 'node:crypto';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { TimeoutFailure, type Payload, type PayloadCodec } from '@temporalio/common';
import { historyFromJSON, historyToJSON, type History } from '@temporalio/common/lib/proto-utils';
import { REPLAY_RUN_WORKFLOW, type ReplayOutcome, type ReplayRunWorkflow } from '../contracts/replay-run';
import { replayRunWorkflowId } from '../domain/ids';
import { decodeWith } from '../adapters/payload-codec';
import { SA } from '../domain/search-attributes';
import type { AuditAction } from '../domain/audit';
import { recordAudit } from '../db/audit';
import type { Pool } from '../db/pool';

/** A run's history, with the ids it belongs to. */
export interface HistoryRef {
  workflowId: string;
  runId?: string;
  history: History;
}

/**
 * One history from the server (the latest run, or the given one), its payloads decoded by the client's codecs: what
 * a person reads, a replayer replays and a recording keeps is the clear history, whatever the server holds.
 */
export async function fetchHistory(client: Client, workflowId: string, runId?: string): Promise<HistoryRef> {
  // The run first, then its history: a run that continues as new meanwhile does not mix two runs up.
  const run = runId ?? (await client.workflow.getHandle(workflowId).describe()).runId;
  return { workflowId, runId: run, history: await clearHistory(client, workflowId, run) };
}

/** Every closed or open run a visibility query finds, with its history (decoded, as fetchHistory's). */
export async function* queryHistories(client: Client, query: string): AsyncIterable<HistoryRef> {
  for await (const w of client.workflow.list({ query })) {
    yield { workflowId: w.workflowId, runId: w.runId, history: await clearHistory(client, w.workflowId, w.runId) };
  }
}

async function clearHistory(client: Client, workflowId: string, runId: string): Promise<History> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  await decodePayloadsIn(history, client.options.loadedDataConverter.payloadCodecs);
  return history;
}

/**
 * Decodes, in place, every payload anywhere in `message` (a history, an event) with `codecs`, last codec first as
 * the SDK does. A payload no codec sealed comes out as it went in: histories from before encryption read the same.
 */
export async function decodePayloadsIn(message: object, codecs: readonly PayloadCodec[]): Promise<void> {
  if (codecs.length === 0) return;
  const found: Payload[] = [];
  collectPayloads(message, found);
  const decoded = await decodeWith(codecs, found);
  found.forEach((payload, i) => {
    payload.metadata = decoded[i]!.metadata;
    payload.data = decoded[i]!.data;
  });
}

/** A Payload message: metadata of byte values, and data bytes. */
const isPayload = (v: object): v is Payload =>
  'metadata' in v && 'data' in v && (v as Payload).data instanceof Uint8Array;

function collectPayloads(value: unknown, into: Payload[]): void {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return;
  if (isPayload(value)) {
    into.push(value);
    return;
  }
  for (const child of Array.isArray(value) ? value : Object.values(value)) collectPayloads(child, into);
}

/** The agent a run belongs to, as its start recorded it (KeelAgentId); undefined for a run of no agent's. */
function agentOfHistory(history: History): string | undefined {
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  const payload = started?.searchAttributes?.indexedFields?.[SA.agentId.name];
  if (!payload?.data) return undefined;
  // Search attributes are never sealed: the server indexes them. A keyword is a JSON string.
  const value: unknown = JSON.parse(Buffer.from(payload.data).toString('utf8'));
  return typeof value === 'string' ? value : undefined;
}

/** An operator's action on a run (a reset, a replay), in the trail of the run's agent; a run of no agent's has none. */
export async function recordRunAction(
  pool: Pool,
  ref: HistoryRef,
  e: { actor: string; action: Extract<AuditAction, `run.${string}`>; detail: object },
): Promise<void> {
  const agentId = agentOfHistory(ref.history);
  if (agentId) await recordAudit(pool, { agentId, subject: ref.workflowId, ...e });
}

/** A history as the JSON `temporal workflow show -o json` prints, and back. */
export const historyJson = {
  stringify: (h: History) => historyToJSON(h),
  parse: (json: string): History => historyFromJSON(JSON.parse(json) as unknown),
};

/** How long a replay may wait for a worker and run: an answer for a person waiting on the request. */
const REPLAY_DEADLINE = '2 minutes';

/**
 * Replays a run's history where the workflow code runs: a worker of the task queue replays it against the build it
 * runs (workflows/replay-run.ts), so the answer is about the code that would run the workflow, not a build of its own.
 * Undefined when no worker replayed it within REPLAY_DEADLINE.
 */
export async function replayOnWorker(
  client: Client,
  taskQueue: string,
  run: { workflowId: string; runId: string },
): Promise<ReplayOutcome | undefined> {
  try {
    return await client.workflow.execute<ReplayRunWorkflow>(REPLAY_RUN_WORKFLOW, {
      taskQueue,
      workflowId: replayRunWorkflowId(randomUUID()),
      workflowExecutionTimeout: REPLAY_DEADLINE,
      memo: { replays: run.workflowId, runId: run.runId },
      args: [run],
    });
  } catch (err) {
    if (err instanceof WorkflowFailedError && err.cause instanceof TimeoutFailure) return undefined;
    throw err;
  }
}
