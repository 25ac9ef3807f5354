import type { ToolCallOrigin, ToolCallStatus } from '../domain/tool-calls';
import type { ToolPolicy } from '../domain/tool-servers';
import { exactInstant, type PageRequest } from './page';
import type { Queryable } from './pool';

export interface ToolCallRow {
  id: string;
  key: string;
  agentId: string;
  server: string;
  tool: string;
  modelName: string;
  arguments: Record<string, unknown>;
  argsDigest: string;
  origin: ToolCallOrigin;
  transcriptKey: string;
  conversationKey: string;
  turnId: string;
  delegateId: string | null;
  toolUseId: string;
  workflowId: string;
  toolsHash: string;
  policy: ToolPolicy;
  retriesSafely: boolean;
  status: ToolCallStatus;
  decidedBy: string | null;
  note: string | null;
  result: string | null;
  resultBytes: number | null;
  redactions: string[];
  failure: string | null;
  durationMs: number | null;
  createdAt: string;
  waitingSince: string | null;
  expiresAt: string | null;
  decidedAt: string | null;
  finishedAt: string | null;
  /** `createdAt` to the microsecond: a list's sort key with `id`. */
  sortAt: string;
}

interface Record_ {
  id: string;
  key: string;
  agent_id: string;
  server: string;
  tool: string;
  model_name: string;
  arguments: Record<string, unknown>;
  args_digest: string;
  origin: ToolCallOrigin;
  transcript_key: string;
  conversation_key: string;
  turn_id: string;
  delegate_id: string | null;
  tool_use_id: string;
  workflow_id: string;
  tools_hash: string;
  policy: ToolPolicy;
  retries_safely: boolean;
  status: ToolCallStatus;
  decided_by: string | null;
  note: string | null;
  result: string | null;
  result_bytes: number | null;
  redactions: string[];
  failure: string | null;
  duration_ms: number | null;
  created_at: Date;
  waiting_since: Date | null;
  expires_at: Date | null;
  decided_at: Date | null;
  finished_at: Date | null;
  sort_at: string;
}

const COLUMNS = `*, ${exactInstant('created_at')} AS sort_at`;
const iso = (d: Date | null) => d?.toISOString() ?? null;

const toRow = (r: Record_): ToolCallRow => ({
  id: r.id,
  key: r.key,
  agentId: r.agent_id,
  server: r.server,
  tool: r.tool,
  modelName: r.model_name,
  arguments: r.arguments,
  argsDigest: r.args_digest,
  origin: r.origin,
  transcriptKey: r.transcript_key,
  conversationKey: r.conversation_key,
  turnId: r.turn_id,
  delegateId: r.delegate_id,
  toolUseId: r.tool_use_id,
  workflowId: r.workflow_id,
  toolsHash: r.tools_hash,
  policy: r.policy,
  retriesSafely: r.retries_safely,
  status: r.status,
  decidedBy: r.decided_by,
  note: r.note,
  result: r.result,
  resultBytes: r.result_bytes,
  redactions: r.redactions,
  failure: r.failure,
  durationMs: r.duration_ms,
  createdAt: r.created_at.toISOString(),
  waitingSince: iso(r.waiting_since),
  expiresAt: iso(r.expires_at),
  decidedAt: iso(r.decided_at),
  finishedAt: iso(r.finished_at),
  sortAt: r.sort_at,
});

export type NewToolCall = Pick<
  ToolCallRow,
  | 'id'
  | 'key'
  | 'agentId'
  | 'server'
  | 'tool'
  | 'modelName'
  | 'arguments'
  | 'argsDigest'
  | 'origin'
  | 'transcriptKey'
  | 'conversationKey'
  | 'turnId'
  | 'delegateId'
  | 'toolUseId'
  | 'workflowId'
  | 'toolsHash'
  | 'policy'
  | 'retriesSafely'
  | 'status'
>;

/** Records a call under its key; a retry of the step that records it finds the first record and answers it. */
export async function recordToolCall(db: Queryable, c: NewToolCall): Promise<ToolCallRow> {
  const inserted = await db.query<Record_>(
    `INSERT INTO tool_calls (id, key, agent_id, server, tool, model_name, arguments, args_digest, origin,
       transcript_key, conversation_key, turn_id, delegate_id, tool_use_id, workflow_id, tools_hash, policy,
       retries_safely, status)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
     ON CONFLICT (key) DO NOTHING RETURNING ${COLUMNS}`,
    [
      c.id,
      c.key,
      c.agentId,
      c.server,
      c.tool,
      c.modelName,
      JSON.stringify(c.arguments),
      c.argsDigest,
      c.origin,
      c.transcriptKey,
      c.conversationKey,
      c.turnId,
      c.delegateId,
      c.toolUseId,
      c.workflowId,
      c.toolsHash,
      c.policy,
      c.retriesSafely,
      c.status,
    ],
  );
  // The call recorded by an earlier attempt, when this one found it there.
  return inserted.rows[0] ? toRow(inserted.rows[0]) : (await toolCallByKey(db, c.key))!;
}

export async function toolCallByKey(db: Queryable, key: string): Promise<ToolCallRow | undefined> {
  const { rows } = await db.query<Record_>(`SELECT ${COLUMNS} FROM tool_calls WHERE key = $1`, [key]);
  return rows[0] && toRow(rows[0]);
}

export async function toolCall(db: Queryable, id: string): Promise<ToolCallRow | undefined> {
  const { rows } = await db.query<Record_>(`SELECT ${COLUMNS} FROM tool_calls WHERE id = $1`, [id]);
  return rows[0] && toRow(rows[0]);
}

export async function toolCallsByIds(db: Queryable, ids: readonly string[]): Promise<ToolCallRow[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<Record_>(`SELECT ${COLUMNS} FROM tool_calls WHERE id = ANY($1::uuid[])`, [ids]);
  return rows.map(toRow);
}

/** The calls of one turn (or delegate), in the order they were made. */
export async function toolCallsOfTurn(db: Queryable, transcriptKey: string, turnId: string): Promise<ToolCallRow[]> {
  const { rows } = await db.query<Record_>(
    `SELECT ${COLUMNS} FROM tool_calls WHERE transcript_key = $1 AND turn_id = $2 ORDER BY created_at, id`,
    [transcriptKey, turnId],
  );
  return rows.map(toRow);
}

/** The calls of some turns of a transcript: what a transcript page shows beside each tool call. */
export async function toolCallsOfTurns(
  db: Queryable,
  transcriptKey: string,
  turnIds: readonly string[],
): Promise<ToolCallRow[]> {
  const { rows } = await db.query<Record_>(
    `SELECT ${COLUMNS} FROM tool_calls WHERE transcript_key = $1 AND turn_id = ANY($2::text[]) ORDER BY created_at, id`,
    [transcriptKey, turnIds],
  );
  return rows.map(toRow);
}

/**
 * The call's turn waits now: it enters the inbox, with the wait's end. A retry of the step finds it open already and
 * answers it as it is.
 */
export async function openToolCallApproval(db: Queryable, id: string, waitMs: number): Promise<ToolCallRow> {
  await db.query(
    `UPDATE tool_calls SET status = 'awaiting_approval', waiting_since = now(),
       expires_at = now() + $2::bigint * interval '1 millisecond'
      WHERE id = $1 AND status = 'prepared'`,
    [id, waitMs],
  );
  return (await toolCall(db, id))!;
}

/** A person's decision (or the wait's end) on a call that waits; a call no longer waiting is left as it is. */
export async function decideToolCallRecord(
  db: Queryable,
  d: { id: string; status: 'approved' | 'rejected' | 'expired' | 'cancelled'; actor: string | null; note?: string },
): Promise<ToolCallRow | undefined> {
  const { rows } = await db.query<Record_>(
    `UPDATE tool_calls SET status = $2, decided_by = $3, note = $4, decided_at = now()
      WHERE id = $1 AND status IN ('prepared', 'awaiting_approval') RETURNING ${COLUMNS}`,
    [d.id, d.status, d.actor, d.note ?? null],
  );
  return rows[0] && toRow(rows[0]);
}

/**
 * A call leaves for its server: answers its status before this step, `running` when an earlier attempt sent it (or
 * died just before), so that a call whose outcome is unknown is not sent twice; undefined when it may not be sent.
 */
export async function markToolCallSent(db: Queryable, id: string): Promise<'approved' | 'running' | undefined> {
  const { rows } = await db.query<{ before: 'approved' | 'running' }>(
    `UPDATE tool_calls t SET status = 'running', started_at = coalesce(t.started_at, now())
       FROM (SELECT status FROM tool_calls WHERE id = $1) old
      WHERE t.id = $1 AND t.status IN ('approved', 'running') RETURNING old.status AS before`,
    [id],
  );
  return rows[0]?.before;
}

/** A send that never left (the server could not be reached): the call waits for its next attempt's send. */
export async function unsendToolCall(db: Queryable, id: string): Promise<void> {
  await db.query(`UPDATE tool_calls SET status = 'approved' WHERE id = $1 AND status = 'running'`, [id]);
}

/** A call's end: its result (whole, after the secret scan) or why its outcome is unknown. */
export async function finishToolCall(
  db: Queryable,
  f: {
    id: string;
    status: 'ok' | 'error' | 'unknown' | 'denied';
    result: string | null;
    resultBytes: number | null;
    redactions: string[];
    failure: string | null;
    durationMs: number | null;
  },
): Promise<ToolCallRow | undefined> {
  const { rows } = await db.query<Record_>(
    `UPDATE tool_calls SET status = $2, result = $3, result_bytes = $4, redactions = $5, failure = $6,
       duration_ms = $7, finished_at = now()
      WHERE id = $1 AND status IN ('approved', 'running') RETURNING ${COLUMNS}`,
    [f.id, f.status, f.result, f.resultBytes, f.redactions, f.failure, f.durationMs],
  );
  return rows[0] && toRow(rows[0]);
}

/** An agent's calls, newest first, of one status or of all. */
export async function listToolCalls(
  db: Queryable,
  agentId: string,
  filter: { status?: ToolCallStatus },
  page: PageRequest<{ at: string; id: string }>,
): Promise<ToolCallRow[]> {
  const { rows } = await db.query<Record_>(
    `SELECT ${COLUMNS} FROM tool_calls
      WHERE agent_id = $1 AND ($2::text IS NULL OR status = $2)
        AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::uuid))
      ORDER BY created_at DESC, id DESC LIMIT $5`,
    [agentId, filter.status ?? null, page.after?.at ?? null, page.after?.id ?? null, page.limit],
  );
  return rows.map(toRow);
}
