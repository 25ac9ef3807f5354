import type { Delivery, DeliveryOutcome, DeliveryReport } from '../domain/delivery';
import { SETTLE_EFFECT_SQL, type EffectStatus } from './effects';
import type { Queryable } from './pool';

export interface DeliveryRecord {
  effectKey: string;
  conversationKey: string | null;
  turnId: string | null;
  target: Delivery;
  text: string;
}

/** One row per delivery, keyed by its effect; every attempt bumps `attempts` and keeps the last error. */
export async function recordDeliveryAttempt(db: Queryable, d: DeliveryRecord, attempt: number): Promise<void> {
  await db.query(
    `INSERT INTO deliveries (effect_key, conversation_key, turn_id, channel, target, text, attempts)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (effect_key) DO UPDATE
       SET attempts = GREATEST(deliveries.attempts, EXCLUDED.attempts), updated_at = now()`,
    [d.effectKey, d.conversationKey, d.turnId, d.target.channel, JSON.stringify(d.target), d.text, attempt],
  );
}

export async function recordDeliveryError(db: Queryable, effectKey: string, error: string): Promise<void> {
  await db.query('UPDATE deliveries SET last_error = $2, updated_at = now() WHERE effect_key = $1', [effectKey, error]);
}

/** A delivery's outcome, and its effect settled with the report, in one statement. */
export async function recordDeliveryOutcome(
  db: Queryable,
  effectKey: string,
  outcome: DeliveryOutcome,
  error: string | undefined,
  effect: { status: Exclude<EffectStatus, 'pending'>; report: DeliveryReport },
): Promise<void> {
  await db.query(
    `WITH outcome AS (
       UPDATE deliveries SET outcome = $4, last_error = COALESCE($5, last_error), updated_at = now()
        WHERE effect_key = $1)
     ${SETTLE_EFFECT_SQL}`,
    [effectKey, effect.status, JSON.stringify(effect.report), outcome, error ?? null],
  );
}
