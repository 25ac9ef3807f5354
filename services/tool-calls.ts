import { createHash, randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { ToolServerError } from '../adapters/mcp/client';
import type { Transports } from '../adapters/delivery/transport';
import {
  decideToolCall,
  type PrepareToolCallInput,
  type RunToolCallInput,
  type SettleToolCallInput,
  type ToolCallResult,
} from '../contracts/tool-calls';
import { beginEffect, settleEffect } from '../db/effects';
import type { Pool } from '../db/pool';
import * as calls from '../db/tool-calls';
import { getToolServer } from '../db/tool-servers';
import { canonicalJson } from '../domain/canonical-json';
import { toolApprovalNoticeEffectKey, toolCallKey } from '../domain/ids';
import type { ContentBlock, ModelMessage, ToolUseBlock } from '../domain/model';
import { redactSecrets } from '../domain/secret-scan';
import { resultPreview, TOOL_CALLS, type PreparedToolCall, type ToolCallDecision } from '../domain/tool-calls';
import { retriesSafely } from '../domain/tool-servers';
import { decisionAudit, submitDecision, type DecisionAnswer } from './approvals';
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

/** Looks the tool up in the turn's pinned list, applies its policy and records the call (once, under its key). */
export async function prepareToolCall(deps: ToolCallDeps, input: PrepareToolCallInput): Promise<PreparedToolCall> {
  const { toolUse } = input;
  const pinned = await pinnedTurnTools(deps.pool, input.transcriptKey, input.turnId);
  const tool = pinned?.tools.find((t) => t.modelName === toolUse.name);
  if (!pinned || !tool)
    return {
      kind: 'answer',
      content: `unknown tool "${toolUse.name}": it is not among the tools offered`,
      isError: true,
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
    status: waits ? 'awaiting_approval' : 'approved',
    expiresInMs: waits ? deps.approvalWaitMs : null,
  });
  const label = `tool ${row.modelName}`;
  if (row.policy !== 'approve') return { kind: 'run', callId: row.id, policy: row.policy, label };
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
        `${canonicalJson(args).slice(0, 500)} (tool call ${row.id}; it expires at ${row.expiresAt}).`,
    },
    { signal: AbortSignal.timeout(5_000), heartbeat: () => undefined },
  ).catch(() => undefined);
  return { kind: 'approve', callId: row.id, argsDigest: row.argsDigest, expiresInMs, label };
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
  if (['ok', 'error', 'unknown', 'denied'].includes(row.status)) return resultOf(row);
  const before = await calls.markToolCallSent(deps.pool, row.id);
  if (!before) throw ApplicationFailure.nonRetryable(`tool call ${row.id} is ${row.status}: it may not be sent`);
  await beginEffect(deps.pool, row.key, 'tool_call', { server: row.server, tool: row.tool, args: row.argsDigest });
  if (before === 'running' && !row.retriesSafely)
    return finish(deps, row, {
      status: 'unknown',
      failure:
        'an earlier attempt sent this call and no answer was recorded (its worker stopped); it was not sent again ' +
        'because the tool does not say a repeat is harmless',
    });
  const server = await getToolServer(deps.pool, row.agentId, row.server);
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
    return finish(deps, row, {
      status: err.sent ? 'unknown' : 'error',
      failure: err.sent ? `${err.message}; it was not sent again` : `${err.message} (tried ${step.attempt} times)`,
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

/**
 * Messages for the model with every result kept by reference read whole, up to the model's budget for one result;
 * where a result is cut, the model reads a notice saying so.
 */
export async function withWholeResults(pool: Pool, messages: ModelMessage[]): Promise<ModelMessage[]> {
  const refs = messages.flatMap((m) => m.content.flatMap((b) => (b.type === 'tool_result' && b.ref ? [b.ref] : [])));
  if (refs.length === 0) return messages;
  const byId = new Map((await calls.toolCallsByIds(pool, refs)).map((r) => [r.id, r]));
  return messages.map((m) => ({
    ...m,
    content: m.content.map((b) => {
      if (b.type !== 'tool_result' || !b.ref) return b;
      const { ref, ...block } = b;
      const whole = byId.get(ref)?.result;
      if (whole == null) return block;
      const cut = whole.length > TOOL_CALLS.modelResultChars;
      const text = cut
        ? `${whole.slice(0, TOOL_CALLS.modelResultChars)}\n[cut: this result is ${whole.length} characters; ` +
          `the first ${TOOL_CALLS.modelResultChars} are shown]`
        : whole;
      return { ...block, content: text };
    }),
  }));
}

export type ToolCallDecisionAnswer =
  | { ok: true; call: calls.ToolCallRow }
  | { ok: false; why: 'not_found' }
  | { ok: false; why: 'not_awaiting_approval'; status: string }
  | { ok: false; why: Exclude<DecisionAnswer, 'taken'> };

/**
 * A person's decision on a call that waits, sent to the turn or delegate waiting for it, bound to the arguments the
 * record holds: the workflow takes it only for that call, with those arguments, once.
 */
export async function decideOnToolCall(
  pool: Pool,
  temporal: Client,
  deadlineMs: number,
  d: { agentId: string; callId: string; approved: boolean; note: string | undefined; actor: string },
): Promise<ToolCallDecisionAnswer> {
  const call = await calls.toolCall(pool, d.callId);
  if (!call || call.agentId !== d.agentId) return { ok: false, why: 'not_found' };
  if (call.status !== 'awaiting_approval') return { ok: false, why: 'not_awaiting_approval', status: call.status };
  const decision: ToolCallDecision = {
    callId: call.id,
    argsDigest: call.argsDigest,
    approved: d.approved,
    actor: d.actor,
    ...(d.note ? { note: d.note } : {}),
  };
  const answer = await submitDecision(
    temporal,
    deadlineMs,
    () => temporal.workflow.getHandle(call.workflowId).executeUpdate(decideToolCall, { args: [decision] }),
    { pool, entry: decisionAudit('tool_call', { ...d, subject: call.id }) },
  );
  if (answer !== 'taken') return { ok: false, why: answer };
  // The workflow records it too; written here as well, so that the answer already shows the decision.
  const status = d.approved ? 'approved' : 'rejected';
  const decided = await calls.decideToolCallRecord(pool, { id: call.id, status, actor: d.actor, note: d.note });
  return { ok: true, call: decided ?? (await calls.toolCall(pool, call.id))! };
}

export { listToolCalls, toolCall, type ToolCallRow } from '../db/tool-calls';

/** A tool call as a transcript shows it: what was asked, what came back, and for a server's tool its record. */
export interface TranscriptToolCall {
  toolUseId: string;
  /** The name the model called (a server's tool as `<server>__<tool>`); null when its step is not on this page. */
  name: string | null;
  arguments: Record<string, unknown> | null;
  result: string;
  isError: boolean;
  server?: Pick<
    calls.ToolCallRow,
    'id' | 'server' | 'tool' | 'policy' | 'status' | 'decidedBy' | 'note' | 'durationMs'
  >;
}

/**
 * The tool calls each `tool` row of a transcript page answers: the name and arguments from the model step that asked
 * (on the page, or the call's record), the result as the transcript keeps it, and a server tool's record beside it.
 */
export async function transcriptToolCalls<R extends { role: string; turnId: string | null; content: ContentBlock[] }>(
  pool: Pool,
  transcriptKey: string,
  rows: readonly R[],
): Promise<(R & { toolCalls?: TranscriptToolCall[] })[]> {
  const turnIds = [...new Set(rows.flatMap((r) => (r.role === 'tool' && r.turnId ? [r.turnId] : [])))];
  if (turnIds.length === 0) return [...rows];
  const key = (turnId: string | null, toolUseId: string) => `${turnId}\u0000${toolUseId}`;
  const asked = new Map<string, ToolUseBlock>();
  for (const r of rows) for (const b of r.content) if (b.type === 'tool_use') asked.set(key(r.turnId, b.id), b);
  const records = new Map(
    (await calls.toolCallsOfTurns(pool, transcriptKey, turnIds)).map((c) => [key(c.turnId, c.toolUseId), c]),
  );
  return rows.map((r) => {
    if (r.role !== 'tool') return r;
    const toolCalls = r.content.flatMap((b): TranscriptToolCall[] => {
      if (b.type !== 'tool_result') return [];
      const use = asked.get(key(r.turnId, b.tool_use_id));
      const record = records.get(key(r.turnId, b.tool_use_id));
      return [
        {
          toolUseId: b.tool_use_id,
          name: use?.name ?? record?.modelName ?? null,
          arguments: use?.input ?? record?.arguments ?? null,
          result: b.content,
          isError: b.is_error === true,
          ...(record
            ? {
                server: {
                  id: record.id,
                  server: record.server,
                  tool: record.tool,
                  policy: record.policy,
                  status: record.status,
                  decidedBy: record.decidedBy,
                  note: record.note,
                  durationMs: record.durationMs,
                },
              }
            : {}),
        },
      ];
    });
    return { ...r, toolCalls };
  });
}
