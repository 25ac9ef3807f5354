import type { Delivery, DeliveryOutcome, DeliveryReport } from '../domain/delivery';
import { beginEffectSql, SETTLE_EFFECT_SQL, type Effect, type EffectStatus } from './effects';
import { eventCall } from './events';
import type { Queryable } from './pool';

export interface DeliveryRecord {
  effectKey: string;
  conversationKey: string | null;
  turnId: string | null;
  target: Delivery;
  text: string;
}

/**
 * A delivery's next attempt, in one statement: its effect's attempt counted in the ledger (beginEffect) and, unless
 * the effect is settled already, its row, keyed by the effect; every attempt bumps `attempts`. Answers the effect.
 */
export async function beginDeliveryAttempt(db: Queryable, d: DeliveryRecord): Promise<Effect<DeliveryReport>> {
  const { rows } = await db.query<Effect<DeliveryReport>>(
    `WITH target AS (SELECT $7::jsonb AS target),
     effect AS (${beginEffectSql()}),
     attempt AS (${ATTEMPT_SQL})
     SELECT * FROM effect`,
    [
      d.effectKey,
      'delivery',
      JSON.stringify({ target: d.target, text: d.text }),
      d.conversationKey,
      d.turnId,
      d.text,
      JSON.stringify(d.target),
    ],
  );
  return rows[0]!;
}

/**
 * A reply's delivery attempt, as beginDeliveryAttempt, to where its turn's replies go, with the reply's text kept on
 * its transcript entry (the text sent, which the console and the next turn read): one statement. Undefined when the
 * turn is not recorded.
 */
export async function beginReplyDeliveryAttempt(
  db: Queryable,
  d: { effectKey: string; conversationKey: string; turnId: string; text: string; replySeq: number },
): Promise<{ target: Delivery; effect: Effect<DeliveryReport> } | undefined> {
  const { rows } = await db.query<Effect<DeliveryReport> & { target: Delivery }>(
    `WITH reply AS (UPDATE messages SET text = $6 WHERE conversation_key = $4 AND seq = $3),
     target AS (SELECT delivery AS target FROM turns WHERE conversation_key = $4 AND turn_id = $5),
     effect AS (${beginEffectSql(`SELECT $1, $2, jsonb_build_object('target', target, 'text', $6::text) FROM target`)}),
     attempt AS (${ATTEMPT_SQL})
     SELECT t.target, e.* FROM target t CROSS JOIN effect e`,
    [d.effectKey, 'delivery', d.replySeq, d.conversationKey, d.turnId, d.text],
  );
  const r = rows[0];
  if (!r) return undefined;
  const { target, ...effect } = r;
  return { target, effect };
}

/** The attempt's row, unless its effect is settled: $1 its key, $4 and $5 its conversation and turn, $6 its text. */
const ATTEMPT_SQL = `
       INSERT INTO deliveries (effect_key, conversation_key, turn_id, channel, target, text, attempts)
       SELECT $1, $4, $5, t.target->>'channel', t.target, $6, e.attempts
         FROM effect e, target t WHERE e.status = 'pending' OR e.result IS NULL
       ON CONFLICT (effect_key) DO UPDATE
         SET attempts = GREATEST(deliveries.attempts, EXCLUDED.attempts), updated_at = now()`;

export async function recordDeliveryError(db: Queryable, effectKey: string, error: string): Promise<void> {
  await db.query('UPDATE deliveries SET last_error = $2, updated_at = now() WHERE effect_key = $1', [effectKey, error]);
}

/**
 * A delivery's outcome, and its effect settled with the report, in one statement; with the event that announces it,
 * when there is one (a reply's reply.delivered).
 */
export async function recordDeliveryOutcome(
  db: Queryable,
  effectKey: string,
  outcome: DeliveryOutcome,
  error: string | undefined,
  effect: { status: Exclude<EffectStatus, 'pending'>; report: DeliveryReport },
  event?: { key: string; type: 'reply.delivered'; about: string[]; data: Record<string, unknown> },
): Promise<void> {
  const announce = event && eventCall(6, event.key, event.type, event.about, event.data);
  await db.query(
    `WITH outcome AS (
       UPDATE deliveries SET outcome = $4, last_error = COALESCE($5, last_error), updated_at = now()
        WHERE effect_key = $1)
     ${announce ? `, settled AS (${SETTLE_EFFECT_SQL}) SELECT ${announce.sql}` : SETTLE_EFFECT_SQL}`,
    [effectKey, effect.status, JSON.stringify(effect.report), outcome, error ?? null, ...(announce?.params ?? [])],
  );
}
