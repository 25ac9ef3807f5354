import type { QueuedMessage, TurnEnd, TurnStatus } from '../domain/conversation';
import { NO_DELIVERY, type Delivery, type DeliveryOutcome } from '../domain/delivery';
import type { InboundMessage, MessageMode } from '../domain/messages';
import type { ContentBlock } from '../domain/model';
import { transcriptOrigin } from '../domain/ids';
import type { TranscriptMessage, TranscriptRole } from '../domain/transcript';
import { ENSURE_AGENT_SQL } from './agents';
import { eventCall } from './events';
import { toTurnToReflect, turnToReflectSql, type TurnToReflect, type TurnToReflectRow } from './proposals';
import { containing, exactInstant, type PageRequest } from './page';
import type { Pool, Queryable } from './pool';

/**
 * A conversation's row comes into being on first use; its agent's row must exist. Its key and its (agent, id) pair
 * are both unique: a conflict on either is the same conversation, so no conflict target (with `(key)` alone, a
 * simultaneous first insert could fail on the pair's index instead of doing nothing).
 */
export async function ensureConversation(
  db: Queryable,
  c: { key: string; agentId: string; conversationId: string },
): Promise<void> {
  await db.query(
    'INSERT INTO conversations (key, agent_id, conversation_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
    [c.key, c.agentId, c.conversationId],
  );
}

export interface AcceptInput {
  conversationKey: string;
  agentId: string;
  conversationId: string;
  message: InboundMessage;
  /** The turn this message starts, or the running turn it steers into. */
  turnId: string;
  /** False when the message joins a running turn (steer) instead of starting one. */
  startsTurn: boolean;
}

/**
 * Records an inbound message once per messageId. A second submission of the same messageId returns the turn of
 * the first and changes nothing.
 *
 * One statement: the agent's and conversation's rows if new, the message, the conversation's default delivery and
 * the message's turn. An existing conversation's row is held until it commits, so that accepts of one conversation
 * commit in their turns' order. A conversation another statement is creating at the same moment is not in this
 * statement's snapshot: nothing is recorded, and the statement runs again once that one has committed.
 */
export async function acceptInbound(pool: Pool, a: AcceptInput): Promise<{ turnId: string; duplicate: boolean }> {
  const m = a.message;
  const delivery = m.delivery ? JSON.stringify(m.delivery) : null;
  for (let attempt = 1; ; attempt++) {
    const { rows } = await pool.query<{ seen: boolean; inserted: string | null }>(
      `WITH agent AS (${ENSURE_AGENT_SQL}
       ), created AS (
         INSERT INTO conversations (key, agent_id, conversation_id, default_delivery) VALUES ($2, $1, $3, $7::jsonb)
         ON CONFLICT DO NOTHING RETURNING default_delivery
       ), conv AS (
         SELECT 1 FROM created UNION ALL SELECT 1 FROM conversations WHERE key = $2
       ), msg AS (
         INSERT INTO inbound_messages (conversation_key, message_id, turn_id, text, author, mode, delivery, notify)
         SELECT $2, $5, $4, $6, $8, $9, $7::jsonb, $10 WHERE EXISTS (SELECT 1 FROM conv)
         ON CONFLICT DO NOTHING RETURNING turn_id
       ), kept AS (
         -- A message's delivery becomes the conversation's default for later messages that name none.
         UPDATE conversations SET default_delivery = COALESCE($7::jsonb, default_delivery)
          WHERE key = $2 AND EXISTS (SELECT 1 FROM msg) RETURNING default_delivery
       ), turn AS (
         INSERT INTO turns (turn_id, conversation_key, message_id, status, delivery)
         SELECT $4, $2, $5, 'queued',
                COALESCE((SELECT default_delivery FROM kept), (SELECT default_delivery FROM created), $11::jsonb)
          -- Its order drawn once the conversation's row is held (kept), or new (created).
          WHERE $12::boolean AND EXISTS (SELECT 1 FROM msg)
            AND (EXISTS (SELECT 1 FROM kept) OR EXISTS (SELECT 1 FROM created))
       )
       SELECT EXISTS (SELECT 1 FROM conv) AS seen, (SELECT turn_id FROM msg) AS inserted`,
      [
        a.agentId,
        a.conversationKey,
        a.conversationId,
        a.turnId,
        m.messageId,
        m.text,
        delivery,
        m.author ?? null,
        m.mode,
        m.notify ?? null,
        JSON.stringify(NO_DELIVERY),
        a.startsTurn,
      ],
    );
    const { seen, inserted } = rows[0]!;
    if (inserted !== null) return { turnId: a.turnId, duplicate: false };
    if (!seen) {
      if (attempt < 3) continue;
      throw new Error(`conversation ${a.conversationKey} could not be recorded`);
    }
    const existing = await pool.query<{ turn_id: string }>(
      'SELECT turn_id FROM inbound_messages WHERE conversation_key = $1 AND message_id = $2',
      [a.conversationKey, m.messageId],
    );
    const turnId = existing.rows[0]!.turn_id;
    // The same turnId means this is a retry of the very acceptance that committed (the activity's reply was lost):
    // it is the same message, not a duplicate of an earlier one, and its turn must still be queued.
    return { turnId, duplicate: turnId !== a.turnId };
  }
}

export interface NewTranscriptEntry {
  role: TranscriptRole;
  content: ContentBlock[];
  /** What the API shows as the message's text. */
  text: string;
  origin: string;
}

/**
 * Appends entries to the transcript, each at most once per origin, and returns the seq of the last entry (or the
 * conversation's last seq when there are none). The conversation row is locked so that seqs are gapless and ordered.
 * One statement whatever the count of entries, so also a transaction of its own outside one.
 */
export async function appendTranscript(
  db: Queryable,
  conversationKey: string,
  turnId: string,
  entries: readonly NewTranscriptEntry[],
): Promise<number> {
  const last = entries.at(-1);
  if (!last) {
    // Nothing to add: the lock alone, which orders this transaction after any append in flight.
    const lock = await db.query<{ last_seq: number }>('SELECT last_seq FROM conversations WHERE key = $1 FOR UPDATE', [
      conversationKey,
    ]);
    return lock.rows[0]?.last_seq ?? 0;
  }
  // One round trip: the function locks the conversation first, then adds what is not there yet (the migration
  // one-round-trip-steps says why that order). The last entry's seq, whether this call or an earlier one added it.
  const { rows } = await db.query<{ origin: string; seq: number }>(
    'SELECT origin, seq FROM keel_append_transcript($1, $2, $3::jsonb)',
    [conversationKey, turnId, entriesJson(entries)],
  );
  return rows.find((r) => r.origin === last.origin)!.seq;
}

/** Entries as keel_append_transcript takes them: `i` keeps their order. */
export function entriesJson(entries: readonly NewTranscriptEntry[]): string {
  const rows = entries.map((e, i) => ({ i, role: e.role, content: e.content, text: e.text, origin: e.origin }));
  return JSON.stringify(rows);
}

export async function inboundTexts(
  db: Queryable,
  conversationKey: string,
  messageIds: readonly string[],
): Promise<{ messageId: string; text: string; author: string | null }[]> {
  const { rows } = await db.query<{ message_id: string; text: string; author: string | null }>(
    'SELECT message_id, text, author FROM inbound_messages WHERE conversation_key = $1 AND message_id = ANY($2)',
    [conversationKey, messageIds],
  );
  const byId = new Map(rows.map((r) => [r.message_id, r]));
  return messageIds.flatMap((id) => {
    const r = byId.get(id);
    return r ? [{ messageId: id, text: r.text, author: r.author }] : [];
  });
}

/** Steered messages are answered by the running turn: their own queued turns are withdrawn. */
export async function joinTurn(
  db: Queryable,
  conversationKey: string,
  turnId: string,
  steered: readonly { messageId: string; turnId: string }[],
): Promise<void> {
  if (steered.length === 0) return;
  const ids = steered.map((m) => m.messageId);
  await db.query('UPDATE inbound_messages SET turn_id = $3 WHERE conversation_key = $1 AND message_id = ANY($2)', [
    conversationKey,
    ids,
    turnId,
  ]);
  await db.query(`DELETE FROM turns WHERE conversation_key = $1 AND turn_id = ANY($2) AND status = 'queued'`, [
    conversationKey,
    steered.map((m) => m.turnId),
  ]);
}

export async function openTurns(db: Queryable, conversationKey: string): Promise<QueuedMessage[]> {
  const { rows } = await db.query<{ turn_id: string; message_id: string; mode: MessageMode; notify: string | null }>(
    `SELECT t.turn_id, t.message_id, i.mode, i.notify FROM turns t
       JOIN inbound_messages i ON i.conversation_key = t.conversation_key AND i.message_id = t.message_id
      WHERE t.conversation_key = $1 AND t.status IN ('queued', 'running') ORDER BY t.accepted_order`,
    [conversationKey],
  );
  return rows.map((r) => ({
    turnId: r.turn_id,
    messageId: r.message_id,
    mode: r.mode,
    ...(r.notify ? { notify: r.notify } : {}),
  }));
}

/**
 * How many open turns of the conversation were accepted before this one; undefined when this one is not open itself
 * (it has ended, or was folded into the turn it was steered into).
 */
export async function openTurnsBefore(
  db: Queryable,
  conversationKey: string,
  turnId: string,
): Promise<number | undefined> {
  const { rows } = await db.query<{ ahead: string }>(
    `SELECT (SELECT count(*) FROM turns o WHERE o.conversation_key = t.conversation_key
               AND o.status IN ('queued', 'running') AND o.accepted_order < t.accepted_order) AS ahead
       FROM turns t WHERE t.turn_id = $1 AND t.conversation_key = $2 AND t.status IN ('queued', 'running')`,
    [turnId, conversationKey],
  );
  return rows[0] ? Number(rows[0].ahead) : undefined;
}

/**
 * Whether a message sent in one of these modes (an interrupt, a steer) waits in the conversation: recorded, its turn
 * not begun, nor joined to the running turn yet.
 */
export async function messageWaits(
  db: Queryable,
  conversationKey: string,
  modes: readonly MessageMode[],
): Promise<boolean> {
  const { rowCount } = await db.query(
    `SELECT 1 FROM turns t
       JOIN inbound_messages i ON i.conversation_key = t.conversation_key AND i.message_id = t.message_id
      WHERE t.conversation_key = $1 AND t.status = 'queued' AND i.mode = ANY($2::text[]) LIMIT 1`,
    [conversationKey, modes],
  );
  return (rowCount ?? 0) > 0;
}

/** A retrigger turn (relaying delegate results) has no inbound message; it replies where the conversation does. */
export async function createRetriggerTurn(db: Queryable, conversationKey: string, turnId: string): Promise<void> {
  await db.query(
    `INSERT INTO turns (turn_id, conversation_key, message_id, status, delivery, started_at)
     SELECT $2, key, 'retrigger:' || $2, 'running', COALESCE(default_delivery, '{"channel":"none"}'::jsonb), now()
       FROM conversations WHERE key = $1
     ON CONFLICT (turn_id) DO NOTHING`,
    [conversationKey, turnId],
  );
}

/**
 * A turn marked running, its messages read and appended to its transcript (as userEntries in
 * services/conversation-turn.ts makes them), and turn.started published: one statement, the conversation's lock
 * before the event's. Null when the turn has ended already (its message handed over again): nothing is written then.
 * Otherwise the seq of the last entry (of the transcript, with no entries).
 */
export async function markTurnStarted(
  db: Queryable,
  conversationKey: string,
  turnId: string,
  messageIds: readonly string[],
  started: Record<string, unknown>,
): Promise<number | null> {
  const event = eventCall(5, conversationKey, 'turn.started', [turnId], started);
  const { rows } = await db.query<{ running: boolean; last: number | null }>(
    `WITH inbound AS (
       SELECT COALESCE(jsonb_agg(jsonb_build_object(
                'i', ids.n, 'role', 'user', 'text', m.text, 'origin', $4 || m.message_id,
                'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', m.text))) ORDER BY ids.n), '[]')
                AS entries,
              $4 || (array_agg(m.message_id ORDER BY ids.n DESC))[1] AS last_origin
         FROM unnest($3::text[]) WITH ORDINALITY AS ids(id, n)
         JOIN inbound_messages m ON m.conversation_key = $2 AND m.message_id = ids.id),
     running AS (
       UPDATE turns SET status = 'running', started_at = COALESCE(started_at, now())
        WHERE turn_id = $1 AND status IN ('queued', 'running') RETURNING turn_id),
     appended AS (
       SELECT count(DISTINCT r.turn_id) AS turns,
              max(entry.seq) FILTER (WHERE entry.origin = (SELECT last_origin FROM inbound)) AS last
         FROM running r LEFT JOIN LATERAL keel_append_transcript($2, r.turn_id, (SELECT entries FROM inbound)) AS entry
           ON true)
     SELECT turns > 0 AS running,
            COALESCE(last, (SELECT last_seq FROM conversations WHERE key = $2)) AS last,
            CASE WHEN turns > 0 THEN ${event.sql} END AS published
       FROM appended`,
    [turnId, conversationKey, messageIds, transcriptOrigin.userMessage(''), ...event.params],
  );
  const row = rows[0]!;
  return row.running ? (row.last ?? 0) : null;
}

/** Marks an open turn running (its start, the first time); false when it has ended already. */
export async function markTurnRunning(db: Queryable, turnId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE turns SET status = 'running', started_at = COALESCE(started_at, now())
      WHERE turn_id = $1 AND status IN ('queued', 'running')`,
    [turnId],
  );
  return (rowCount ?? 0) > 0;
}

/** The transcript up to and including `throughSeq`, at most `limit` of the latest messages. */
export async function loadTranscript(
  db: Queryable,
  conversationKey: string,
  throughSeq: number,
  limit: number,
): Promise<TranscriptMessage[]> {
  const { rows } = await db.query<{ seq: number; role: TranscriptRole; content: ContentBlock[] }>(
    `SELECT seq, role, content FROM (
       SELECT seq, role, content FROM messages WHERE conversation_key = $1 AND seq <= $2 ORDER BY seq DESC LIMIT $3
     ) t ORDER BY seq`,
    [conversationKey, throughSeq, limit],
  );
  return rows;
}

/** The transcript after the row of `origin` (a delegate's own work, after its task message). */
export async function transcriptAfterOrigin(
  db: Queryable,
  conversationKey: string,
  origin: string,
  limit: number,
): Promise<TranscriptMessage[]> {
  const { rows } = await db.query<{ seq: number; role: TranscriptRole; content: ContentBlock[] }>(
    `SELECT seq, role, content FROM (
       SELECT seq, role, content FROM messages
        WHERE conversation_key = $1 AND seq > (SELECT seq FROM messages WHERE conversation_key = $1 AND origin = $2)
        ORDER BY seq DESC LIMIT $3
     ) t ORDER BY seq`,
    [conversationKey, origin, limit],
  );
  return rows;
}

export async function findByOrigin(
  db: Queryable,
  conversationKey: string,
  origin: string,
): Promise<{ seq: number; content: ContentBlock[] } | undefined> {
  const { rows } = await db.query<{ seq: number; content: ContentBlock[] }>(
    'SELECT seq, content FROM messages WHERE conversation_key = $1 AND origin = $2',
    [conversationKey, origin],
  );
  return rows[0];
}

/**
 * Commits a turn's end: its status, then its trailing transcript entries and turn.finished. Answers the turn as
 * reflection takes it up (db/proposals.ts turnToReflect).
 */
export async function finishTurn(
  db: Queryable,
  conversationKey: string,
  turnId: string,
  end: TurnEnd,
  modelCalls: number,
  entries: readonly NewTranscriptEntry[],
): Promise<TurnToReflect | undefined> {
  const event = eventCall(8, conversationKey, 'turn.finished', [turnId], { turnId, status: end.status });
  // One statement: the end, then its entries (when the end was written), then turn.finished; the event's lock after
  // the conversation's, as in every step. A reply that was sent stays the turn's end: an interrupt the workflow saw
  // after a model step had sent it (its step retried, then cancelled) does not say otherwise.
  const { rows } = await db.query<TurnToReflectRow>(
    `WITH ended AS (
       UPDATE turns SET status = $2, reply_seq = $3, error = $4, model_calls = $5,
              finished_at = COALESCE(finished_at, now())
       WHERE turn_id = $1 AND NOT (status = 'replied' AND $2 = 'interrupted') RETURNING turn_id),
     appended AS (
       SELECT max(entry.seq) AS last FROM ended, keel_append_transcript($6, ended.turn_id, $7::jsonb) AS entry),
     published AS (SELECT appended.last, ${event.sql} FROM appended)
     SELECT reflect.* FROM published
       LEFT JOIN LATERAL (SELECT ${turnToReflectSql('$6', '$1', 'published.last')}) AS reflect ON true`,
    [
      turnId,
      end.status,
      end.status === 'replied' ? end.replySeq : null,
      'error' in end ? JSON.stringify(end.error) : null,
      modelCalls,
      conversationKey,
      entriesJson(entries),
      ...event.params,
    ],
  );
  const row = rows[0];
  return row?.agent_id ? toTurnToReflect(row) : undefined;
}

export interface TurnView {
  turnId: string;
  messageId: string;
  status: TurnStatus;
  delivery: Delivery;
  reply?: { text: string; delivery: { outcome: DeliveryOutcome | null; attempts: number } };
  error?: { code: string; message: string };
}

/** The turn that answers a message (a steered message is answered by the turn it joined): one read. */
export async function getTurnOfMessage(
  db: Queryable,
  conversationKey: string,
  messageId: string,
): Promise<TurnView | undefined> {
  const { rows } = await db.query<{
    turn_id: string;
    message_id: string;
    status: TurnStatus;
    delivery: Delivery;
    error: { code: string; message: string } | null;
    reply_text: string | null;
    outcome: DeliveryOutcome | null;
    attempts: number | null;
  }>(
    `SELECT t.turn_id, t.message_id, t.status, t.delivery, t.error, m.text AS reply_text, d.outcome, d.attempts
       FROM turns t
       LEFT JOIN messages m ON m.conversation_key = t.conversation_key AND m.seq = t.reply_seq
       LEFT JOIN LATERAL (
         SELECT outcome, attempts FROM deliveries WHERE turn_id = t.turn_id ORDER BY created_at DESC LIMIT 1
       ) d ON true
      WHERE t.conversation_key = $1
        AND t.turn_id = (SELECT turn_id FROM inbound_messages WHERE conversation_key = $1 AND message_id = $2)`,
    [conversationKey, messageId],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    turnId: r.turn_id,
    messageId: r.message_id,
    status: r.status,
    delivery: r.delivery,
    ...(r.reply_text !== null
      ? { reply: { text: r.reply_text, delivery: { outcome: r.outcome, attempts: r.attempts ?? 0 } } }
      : {}),
    ...(r.error ? { error: r.error } : {}),
  };
}

export interface TranscriptView {
  seq: number;
  role: TranscriptRole;
  text: string;
  at: string;
  turnId: string | null;
  /** The row's blocks: what tool calls a model step asked for, and their results. */
  content: ContentBlock[];
}

export async function listMessages(
  db: Queryable,
  conversationKey: string,
  afterSeq: number,
  limit: number,
): Promise<TranscriptView[]> {
  const { rows } = await db.query<{
    seq: number;
    role: TranscriptRole;
    text: string;
    created_at: Date;
    turn_id: string | null;
    content: ContentBlock[];
  }>(
    `SELECT seq, role, text, created_at, turn_id, content FROM messages
      WHERE conversation_key = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
    [conversationKey, afterSeq, limit],
  );
  return rows.map((r) => ({
    seq: r.seq,
    role: r.role,
    text: r.text,
    at: r.created_at.toISOString(),
    turnId: r.turn_id,
    content: r.content,
  }));
}

export async function conversationExists(db: Queryable, conversationKey: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM conversations WHERE key = $1', [conversationKey]);
  return (rowCount ?? 0) > 0;
}

/** State derived from PostgreSQL, for when the workflow cannot be queried. */
export async function conversationStateFromDb(
  db: Queryable,
  conversationKey: string,
): Promise<{ busy: boolean; queued: number }> {
  const { rows } = await db.query<{ running: string; queued: string }>(
    `SELECT count(*) FILTER (WHERE status = 'running') AS running, count(*) FILTER (WHERE status = 'queued') AS queued
       FROM turns WHERE conversation_key = $1`,
    [conversationKey],
  );
  return { busy: Number(rows[0]?.running ?? 0) > 0, queued: Number(rows[0]?.queued ?? 0) };
}

/** A conversation as the list shows it: its activity, its number of turns and its last turn, in brief. */
export interface ConversationSummary {
  conversationId: string;
  workflowId: string;
  lastActivityAt: string;
  turns: number;
  lastTurn: {
    turnId: string;
    status: TurnStatus;
    messageText: string;
    replyText: string | null;
    deliveryOutcome: string | null;
    finishedAt: string | null;
  } | null;
  /** `lastActivityAt` to the microsecond: the list's sort key with `conversationId`. */
  sortAt: string;
}

/**
 * An agent's conversations, most recent activity first (ties by id), those whose id contains `q` (ignoring case) when
 * given. Activity is the latest of the conversation's creation, its transcript's messages and its turns' starts and
 * ends. The last turn's texts are cut to `previewChars` characters: the message that started it (the user's, or a
 * retrigger turn's synthetic message) and its reply.
 */
export async function listConversations(
  db: Queryable,
  agentId: string,
  filter: { q?: string; previewChars: number },
  page: PageRequest<{ at: string; conversationId: string }>,
): Promise<ConversationSummary[]> {
  const { rows } = await db.query<{
    key: string;
    conversation_id: string;
    last_activity_at: Date;
    sort_at: string;
    turns: string;
    turn_id: string | null;
    status: TurnStatus | null;
    message_text: string | null;
    reply_text: string | null;
    outcome: string | null;
    finished_at: Date | null;
  }>(
    `SELECT c.key, c.conversation_id, w.last_activity_at, ${exactInstant('w.last_activity_at')} AS sort_at, w.turns,
            lt.turn_id, lt.status, lt.message_text, lt.reply_text, lt.outcome, lt.finished_at
       FROM conversations c
       CROSS JOIN LATERAL (
         SELECT greatest(
                  c.created_at,
                  (SELECT max(m.created_at) FROM messages m WHERE m.conversation_key = c.key),
                  (SELECT max(greatest(t.created_at, t.started_at, t.finished_at)) FROM turns t
                    WHERE t.conversation_key = c.key)
                ) AS last_activity_at,
                (SELECT count(*) FROM turns t WHERE t.conversation_key = c.key) AS turns
       ) w
       LEFT JOIN LATERAL (
         SELECT t.turn_id, t.status, left(coalesce(i.text, sm.text, ''), $6) AS message_text,
                left(rm.text, $6) AS reply_text, d.outcome, t.finished_at
           FROM turns t
           LEFT JOIN inbound_messages i ON i.conversation_key = t.conversation_key AND i.message_id = t.message_id
           LEFT JOIN messages sm ON sm.conversation_key = t.conversation_key AND sm.origin = t.message_id
           LEFT JOIN messages rm ON rm.conversation_key = t.conversation_key AND rm.seq = t.reply_seq
           LEFT JOIN LATERAL (
             SELECT outcome FROM deliveries WHERE turn_id = t.turn_id ORDER BY created_at DESC LIMIT 1
           ) d ON true
          WHERE t.conversation_key = c.key ORDER BY t.accepted_order DESC LIMIT 1
       ) lt ON true
      WHERE c.agent_id = $1 AND ($2::text IS NULL OR c.conversation_id ILIKE $2 ESCAPE '\\')
        AND ($3::timestamptz IS NULL OR w.last_activity_at < $3::timestamptz
             OR (w.last_activity_at = $3::timestamptz AND c.conversation_id > $4::text))
      ORDER BY w.last_activity_at DESC, c.conversation_id
      LIMIT $5`,
    [
      agentId,
      filter.q === undefined ? null : containing(filter.q),
      page.after?.at ?? null,
      page.after?.conversationId ?? null,
      page.limit,
      filter.previewChars,
    ],
  );
  return rows.map((r) => ({
    conversationId: r.conversation_id,
    workflowId: r.key,
    lastActivityAt: r.last_activity_at.toISOString(),
    turns: Number(r.turns),
    lastTurn:
      r.turn_id === null
        ? null
        : {
            turnId: r.turn_id,
            status: r.status!,
            messageText: r.message_text ?? '',
            replyText: r.reply_text,
            deliveryOutcome: r.outcome,
            finishedAt: r.finished_at?.toISOString() ?? null,
          },
    sortAt: r.sort_at,
  }));
}
