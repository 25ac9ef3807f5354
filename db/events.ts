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
  type: PublishedType,
  about: readonly (string | number)[],
  data: Record<string, unknown>,
): Promise<void> {
  const event = eventCall(1, key, type, about, data);
  await db.query(`SELECT ${event.sql}`, event.params);
}

type PublishedType = Exclude<ConversationEventType, 'text.delta'>;

/**
 * publishEvent as part of a step's own statement, so that the step and its event take one round trip: the call
 * (keel_publish_event, migration one-round-trip-steps), its parameters numbered from `first`. The event takes its
 * conversation's event lock: a statement that also locks the conversation's row does so first, as every step does.
 */
export function eventCall(
  first: number,
  key: string,
  type: PublishedType,
  about: readonly (string | number)[],
  data: Record<string, unknown>,
): { sql: string; params: unknown[] } {
  const casts = ['text', 'text', 'text::jsonb', 'text', 'text', 'integer'];
  return {
    sql: `keel_publish_event(${casts.map((cast, i) => `$${first + i}::${cast}`).join(', ')})`,
    params: [key, type, JSON.stringify(data), conversationEventId(type, ...about), EVENTS_CHANNEL, MAX_NOTIFY_BYTES],
  };
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
