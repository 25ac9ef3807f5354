import { createHash, randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { ToolServerError } from '../adapters/mcp/client';
import type { Transports } from '../adapters/delivery/transport';
import type {
  OpenToolCallApprovalInput,
  PrepareToolCallInput,
  RunToolCallInput,
  SettleToolCallInput,
  ToolCallAttempt,
  ToolCallResult,
} from '../contracts/tool-calls';
import { beginEffect, settleEffect } from '../db/effects';
import { forkOf } from '../db/forks';
import * as calls from '../db/tool-calls';
import { getToolServer } from '../db/tool-servers';
import { canonicalJson } from '../domain/canonical-json';
import { toolApprovalNoticeEffectKey, toolCallKey } from '../domain/ids';
import { redactSecrets } from '../domain/secret-scan';
import { resultPreview, TOOL_CALLS, type PreparedToolCall } from '../domain/tool-calls';
import { forkDryRun } from '../domain/evals';
import { retriesSafely } from '../domain/tool-servers';
import { noticeToOwner } from './owner-notice';
import { heartbeatWhile, type Step } from './step';
import { withToolServer, type ToolServerDeps } from './tool-servers';
import { pinnedTurnTools } from './turn-tools';

/**
 * The steps of a call of a tool server's tool, each an activity: prepare (look the tool up in the turn's pinned list,
 * apply its policy, record the call under its idempotency key), settle a wait for a person, and run. A call is sent at
 * most once unless its server says a repeat is harmless: a retry that finds it sent and unanswered reports its
 * outcome as unknown instead of sending it again.
 */
export interface ToolCallDeps extends ToolServerDeps {
  transports: Transports;
  /** How long a call that needs a person's approval waits. */
  approvalWaitMs: number;
}

/** The digest a person's approval is bound to: the exact arguments, in canonical form. */
export function argumentsDigest(args: unknown): string {
  return createHash('sha256').update(canonicalJson(args)).digest('hex');
}

/** prepareToolCall, then runToolCall at once for a call its policy lets run: one step instead of two. */
export async function prepareAndRunToolCall(
  deps: ToolCallDeps,
  input: PrepareToolCallInput,
  step: Step,
): Promise<ToolCallAttempt> {
  const recorded = await recordPreparedCall(deps, input);
  if (!('row' in recorded)) return recorded.prepared;
  const { prepared, row } = recorded;
  if (prepared.kind !== 'run') return prepared;
  return { kind: 'ran', how: prepared.policy, result: await runRecordedToolCall(deps, row, step) };
}

/** Looks the tool up in the turn's pinned list, applies its policy and records the call (once, under its key). */
export async function prepareToolCall(deps: ToolCallDeps, input: PrepareToolCallInput): Promise<PreparedToolCall> {
  return (await recordPreparedCall(deps, input)).prepared;
}

/** prepareToolCall, with the call's record when it made or found one. */
async function recordPreparedCall(
  deps: ToolCallDeps,
  input: PrepareToolCallInput,
): Promise<
  { prepared: PreparedToolCall & { kind: 'answer' } } | { prepared: PreparedToolCall; row: calls.ToolCallRow }
> {
  const { toolUse } = input;
  const [pinned, fork] = await Promise.all([
    pinnedTurnTools(deps.pool, input.transcriptKey, input.turnId),
    forkOf(deps.pool, input.conversationKey),
  ]);
  // A fork's call of a tool whose effects are off is answered at once: no record, no wait for a person, no notice.
  const dryRun = fork && forkDryRun(fork, toolUse.name);
  if (dryRun) return { prepared: { kind: 'answer', content: dryRun, isError: true } };
  const tool = pinned?.tools.find((t) => t.modelName === toolUse.name);
  if (!pinned || !tool)
    return {
      prepared: {
        kind: 'answer',
        content: `unknown tool "${toolUse.name}": it is not among the tools offered`,
        isError: true,
      },
    };
  const args = toolUse.input;
  const waits = tool.policy === 'approve';
  const row = await calls.recordToolCall(deps.pool, {
    id: randomUUID(),
    key: toolCallKey(input.transcriptKey, input.turnId, input.callIndex, toolUse.id),
    agentId: input.agentId,
    server: tool.server,
    tool: tool.name,
    modelName: tool.modelName,
    arguments: args,
    argsDigest: argumentsDigest(args),
    origin: input.origin,
    transcriptKey: input.transcriptKey,
    conversationKey: input.conversationKey,
    turnId: input.turnId,
    delegateId: input.delegateId ?? null,
    toolUseId: toolUse.id,
    workflowId: input.workflowId,
    toolsHash: pinned.hash,
    policy: tool.policy,
    retriesSafely: retriesSafely(tool.annotations),
    status: waits ? 'prepared' : 'approved',
  });
  const label = `tool ${row.modelName}`;
  if (row.policy !== 'approve') return { prepared: { kind: 'run', callId: row.id, policy: row.policy, label }, row };
  return { prepared: { kind: 'approve', callId: row.id, argsDigest: row.argsDigest, label }, row };
}

/**
 * The call's turn is waiting for a decision now: the call enters the inbox (only now, so that a decision sent from
 * it always finds the workflow waiting) and its owner hears of it. Answers how long the wait lasts from here.
 */
export async function openToolCallApproval(
  deps: ToolCallDeps,
  input: OpenToolCallApprovalInput,
): Promise<{ expiresInMs: number }> {
  const row = await calls.openToolCallApproval(deps.pool, input.callId, deps.approvalWaitMs);
  const expiresInMs = Math.max(0, Date.parse(row.expiresAt ?? '') - Date.now());
  // The owner hears of it once (the effects ledger); a notice that cannot be sent never holds the call up.
  await noticeToOwner(
    deps.pool,
    deps.transports,
    {
      agentId: row.agentId,
      effectKey: toolApprovalNoticeEffectKey(row.id),
      text:
        `Agent ${row.agentId} waits for your approval to call ${row.modelName} with ` +
        `${canonicalJson(row.arguments).slice(0, 500)} (tool call ${row.id}; it expires at ${row.expiresAt}).`,
    },
    { signal: AbortSignal.timeout(5_000), heartbeat: () => undefined },
  ).catch(() => undefined);
  return { expiresInMs };
}

/** Records how a wait for a person ended: the decision the workflow took, or its expiry or cancellation. */
export async function settleToolCallWait(deps: Pick<ToolCallDeps, 'pool'>, input: SettleToolCallInput): Promise<void> {
  const { callId, decision } = input;
  if (decision) {
    const status = decision.approved ? 'approved' : 'rejected';
    await calls.decideToolCallRecord(deps.pool, { id: callId, status, actor: decision.actor, note: decision.note });
    return;
  }
  const refusal = input.refusal ?? { kind: 'cancelled', reason: 'the wait ended' };
  await calls.decideToolCallRecord(deps.pool, {
    id: callId,
    status: refusal.kind,
    actor: null,
    note: refusal.kind === 'cancelled' ? refusal.reason : undefined,
  });
}

/**
 * Sends the call, once. A call already answered returns its recorded result (a retry, a replay). A retry that finds
 * the call sent and unanswered sends it again only when its server says that is harmless; otherwise the outcome is
 * unknown, recorded for a person, and told to the model.
 */
export async function runToolCall(deps: ToolCallDeps, input: RunToolCallInput, step: Step): Promise<ToolCallResult> {
  const row = await calls.toolCall(deps.pool, input.callId);
  if (!row) throw ApplicationFailure.nonRetryable(`tool call ${input.callId} is not recorded`);
  return runRecordedToolCall(deps, row, step);
}

/** runToolCall, given the call's record as it was just read. */
async function runRecordedToolCall(deps: ToolCallDeps, row: calls.ToolCallRow, step: Step): Promise<ToolCallResult> {
  if (['ok', 'error', 'unknown', 'denied'].includes(row.status)) return resultOf(row);
  // The server's record is read meanwhile: the call goes to it unless it was disabled or removed.
  const [before, server, fork] = await Promise.all([
    calls.markToolCallSent(deps.pool, row.id),
    getToolServer(deps.pool, row.agentId, row.server),
    forkOf(deps.pool, row.conversationKey),
  ]);
  if (!before) throw ApplicationFailure.nonRetryable(`tool call ${row.id} is ${row.status}: it may not be sent`);
  // A fork's tool whose effects a person turned off after the call was prepared: nothing is sent.
  const dryRun = fork && forkDryRun(fork, row.modelName);
  if (dryRun) return finish(deps, row, { status: 'error', failure: dryRun });
  await beginEffect(deps.pool, row.key, 'tool_call', { server: row.server, tool: row.tool, args: row.argsDigest });
  if (before === 'running' && !row.retriesSafely)
    return finish(deps, row, {
      status: 'unknown',
      failure:
        'an earlier attempt sent this call and no answer was recorded (its worker stopped); it was not sent again ' +
        'because the tool does not say a repeat is harmless',
    });
  if (!server || !server.enabled)
    return finish(deps, row, {
      status: 'error',
      failure: `the tool server "${row.server}" was ${server ? 'disabled' : 'removed'} since the turn began`,
    });

  const started = Date.now();
  try {
    const answer = await heartbeatWhile(
      withToolServer(deps, server, (s) =>
        s.callTool(row.tool, row.arguments, {
          idempotencyKey: row.key,
          timeoutMs: TOOL_CALLS.callTimeoutMs,
          signal: step.signal,
        }),
      ),
      () => step.heartbeat(),
    );
    return finish(deps, row, { status: answer.isError ? 'error' : 'ok', text: answer.text, started });
  } catch (err) {
    if (!(err instanceof ToolServerError)) throw err;
    const lastAttempt = step.attempt >= TOOL_CALLS.attempts;
    // Never sent: safe to try again, whatever the tool; the record goes back to waiting for its send.
    if (!err.sent && !lastAttempt) {
      await calls.unsendToolCall(deps.pool, row.id);
      throw ApplicationFailure.retryable(`tool call not sent: ${err.message}`, 'ToolServerUnreachable');
    }
    if (err.sent && row.retriesSafely && !lastAttempt)
      throw ApplicationFailure.retryable(`tool call failed: ${err.message}`, 'ToolCallFailed');
    // Unknown only where a repeat could have changed the world twice; a read-only call that never got its answer
    // simply failed, after its attempts.
    const unknown = err.sent && !row.retriesSafely;
    return finish(deps, row, {
      status: unknown ? 'unknown' : 'error',
      failure: unknown ? `${err.message}; it was not sent again` : `${err.message} (tried ${step.attempt} times)`,
      started,
    });
  }
}

type Ending =
  | { status: 'ok' | 'error'; text: string; started: number }
  | { status: 'unknown' | 'error'; failure: string; started?: number };

/** Records the call's end (the whole result, after the secret scan) and answers what the transcript keeps. */
async function finish(deps: Pick<ToolCallDeps, 'pool'>, row: calls.ToolCallRow, end: Ending): Promise<ToolCallResult> {
  const redacted = 'text' in end ? redactSecrets(end.text) : { text: null, rules: [] };
  // The transcript says so where a secret was taken out: the model and the console read the same result.
  const notice = redacted.rules.length
    ? `\n[Keel redacted what looked like secrets from this result: ${redacted.rules.join(', ')}]`
    : '';
  const result = redacted.text === null ? null : redacted.text + notice;
  const finished = await calls.finishToolCall(deps.pool, {
    id: row.id,
    status: end.status,
    result,
    resultBytes: result === null ? null : Buffer.byteLength(result),
    redactions: redacted.rules,
    failure: 'failure' in end ? end.failure : null,
    durationMs: end.started === undefined ? null : Date.now() - end.started,
  });
  const settled = finished ?? (await calls.toolCall(deps.pool, row.id))!;
  await settleEffect(deps.pool, row.key, settled.status === 'ok' ? 'done' : 'failed', { status: settled.status });
  return resultOf(settled);
}

/** What the model step's transcript keeps of a finished call: the result, or a preview and a reference. */
export function resultOf(row: calls.ToolCallRow): ToolCallResult {
  if (row.status === 'unknown')
    return { content: `outcome unknown: ${row.failure ?? 'no answer was recorded'}`, isError: true };
  if (row.result === null) return { content: row.failure ?? `the call ended ${row.status}`, isError: true };
  const isError = row.status !== 'ok';
  if ((row.resultBytes ?? 0) <= TOOL_CALLS.inlineResultBytes) return { content: row.result, isError };
  return { content: resultPreview(row.result, row.id, row.resultBytes ?? 0), isError, ref: row.id };
}
