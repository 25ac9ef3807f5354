import { conversationEventId } from '../domain/ids';
import type { Queryable } from './pool';

/** The NOTIFY channel every conversation event goes through. */
export const EVENTS_CHANNEL = 'keel_events';

export const CONVERSATION_EVENT_TYPES = [
  'turn.started',
  'text.delta',
  'tool.called',
  'reply.delivered',
  'turn.finished',
  'delegate.finished',
  'conversation.idle',
] as const;
export type ConversationEventType = (typeof CONVERSATION_EVENT_TYPES)[number];

export interface ConversationEvent {
  /** Absent for text deltas, which are not kept. */
  id?: number;
  key: string;
  type: ConversationEventType;
  data: Record<string, unknown>;
}

/** NOTIFY carries at most 8000 bytes; a larger event is announced by id and read from the table. */
const MAX_NOTIFY_BYTES = 7_500;

/**
 * Records a finished event and announces it, in the caller's transaction (or its own statement's): NOTIFY is
 * delivered on commit, so an event of work that rolled back is never seen. Once per type and `about` (the ids of what
 * it is about), so a retried step publishes it once.
 */
export async function publishEvent(
  db: Queryable,
  key: string,
  type: Exclude<ConversationEventType, 'text.delta'>,
  about: readonly (string | number)[],
  data: Record<string, unknown>,
): Promise<void> {
  const dedupeKey = conversationEventId(type, ...about);
  // One statement, as a turn's steps publish several events each: the lock (held until commit: the events of one
  // conversation commit in the order of their ids, so a stream that has read up to an id never finds a smaller one
  // committed later), the row, and its NOTIFY (by id alone when too large; readers then read it from the table). The
  // data goes out as jsonb renders it, as a read from the table gives it.
  await db.query(
    `WITH lock AS (SELECT pg_advisory_xact_lock(hashtext($1::text))),
     added AS (
       INSERT INTO conversation_events (conversation_key, type, data, dedupe_key)
       SELECT $1::text, $2::text, $3::text::jsonb, $4::text FROM lock
       ON CONFLICT (conversation_key, dedupe_key) DO NOTHING RETURNING id),
     announced AS (
       SELECT json_build_object('id', id, 'key', $1::text, 'type', $2::text, 'data', $3::text::jsonb)::text AS whole,
              json_build_object('id', id, 'key', $1::text, 'type', $2::text, 'data', null)::text AS bare
       FROM added)
     SELECT pg_notify($5::text, CASE WHEN octet_length(whole) > $6::integer THEN bare ELSE whole END) FROM announced`,
    [key, type, JSON.stringify(data), dedupeKey, EVENTS_CHANNEL, MAX_NOTIFY_BYTES],
  );
}

/** Streams a text delta to whoever listens now; nothing is stored. */
export async function publishDelta(db: Queryable, key: string, turnId: string, delta: string): Promise<void> {
  const payload = JSON.stringify({ key, type: 'text.delta', data: { turnId, delta } } satisfies ConversationEvent);
  if (Buffer.byteLength(payload) <= MAX_NOTIFY_BYTES)
    await db.query('SELECT pg_notify($1, $2)', [EVENTS_CHANNEL, payload]);
}

export async function eventsAfter(
  db: Queryable,
  key: string,
  afterId: number,
  limit = 1000,
): Promise<ConversationEvent[]> {
  const { rows } = await db.query<{ id: string; type: ConversationEvent['type']; data: Record<string, unknown> }>(
    'SELECT id, type, data FROM conversation_events WHERE conversation_key = $1 AND id > $2 ORDER BY id LIMIT $3',
    [key, afterId, limit],
  );
  return rows.map((r) => ({ id: Number(r.id), key, type: r.type, data: r.data }));
}
