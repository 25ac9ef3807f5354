import type { Queryable } from './pool';

export type EffectStatus = 'pending' | 'done' | 'failed';

export interface Effect<R> {
  key: string;
  status: EffectStatus;
  result: R | null;
  attempts: number;
}

/**
 * The effects ledger: an effect is written here under its idempotency key before it is sent. Each call records one
 * more attempt; an effect already `done` or `failed` is returned as it is, so a retry or a replay never sends twice.
 */
export async function beginEffect<R>(db: Queryable, key: string, kind: string, request: unknown): Promise<Effect<R>> {
  const { rows } = await db.query<Effect<R>>(BEGIN_EFFECT_SQL, [key, kind, JSON.stringify(request)]);
  return rows[0]!;
}

/**
 * An effect's next attempt recorded: $1 its key, $2 its kind, $3 its request, or `rows` that give the three columns
 * (`key`, `kind`, `request`) from what a statement read; answers the effect as beginEffect does (also a statement's
 * first part, named `effect`, for a step that records more with it).
 */
export const beginEffectSql = (rows = 'VALUES ($1, $2, $3::jsonb)') => `
     INSERT INTO effects (key, kind, request, status, attempts) SELECT *, 'pending', 1 FROM (${rows}) AS r
     ON CONFLICT (key) DO UPDATE
       SET attempts = effects.attempts + CASE WHEN effects.status = 'pending' THEN 1 ELSE 0 END, updated_at = now()
     RETURNING key, status, result, attempts`;
const BEGIN_EFFECT_SQL = beginEffectSql();

/** A pending effect settled: $1 its key, $2 its status, $3 its result (also a statement's last part). */
export const SETTLE_EFFECT_SQL =
  "UPDATE effects SET status = $2, result = $3, updated_at = now() WHERE key = $1 AND status = 'pending'";

export async function settleEffect(
  db: Queryable,
  key: string,
  status: Exclude<EffectStatus, 'pending'>,
  result: unknown,
): Promise<void> {
  await db.query(SETTLE_EFFECT_SQL, [key, status, JSON.stringify(result)]);
}
