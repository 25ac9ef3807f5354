import type { Delivery, DeliveryOutcome, DeliveryReport } from '../domain/delivery';
import { BEGIN_EFFECT_SQL, SETTLE_EFFECT_SQL, type Effect, type EffectStatus } from './effects';
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
    `WITH effect AS (${BEGIN_EFFECT_SQL}),
     attempt AS (
       INSERT INTO deliveries (effect_key, conversation_key, turn_id, channel, target, text, attempts)
       SELECT $1, $4, $5, $6, $7, $8, e.attempts FROM effect e WHERE e.status = 'pending' OR e.result IS NULL
       ON CONFLICT (effect_key) DO UPDATE
         SET attempts = GREATEST(deliveries.attempts, EXCLUDED.attempts), updated_at = now())
     SELECT * FROM effect`,
    [
      d.effectKey,
      'delivery',
      JSON.stringify({ target: d.target, text: d.text }),
      d.conversationKey,
      d.turnId,
      d.target.channel,
      JSON.stringify(d.target),
      d.text,
    ],
  );
  return rows[0]!;
}

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
