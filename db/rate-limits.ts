import { adjust, takePlace, type BucketState, type RateCost, type RateLimit } from '../domain/rate-limits';
import { inTransaction, type Pool, type Queryable } from './pool';

/**
 * The shared token buckets of provider rate limits. Every worker reads and writes a bucket under its row lock, on
 * PostgreSQL's clock, so that workers on machines whose clocks differ still share one queue.
 */

/** Locks a bucket's row (creating it when new) and reads its state, its pause and the database's now, in ms. */
async function lockBucket(db: Queryable, bucket: string): Promise<{ state: BucketState; paused: number; now: number }> {
  await db.query('INSERT INTO rate_buckets (bucket) VALUES ($1) ON CONFLICT (bucket) DO NOTHING', [bucket]);
  const { rows } = await db.query<{ state: BucketState; paused: number | null; now: number }>(
    `SELECT state, (extract(epoch FROM paused_until) * 1000)::float8 AS paused,
            (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now
       FROM rate_buckets WHERE bucket = $1 FOR UPDATE`,
    [bucket],
  );
  const row = rows[0]!;
  return { state: row.state, paused: row.paused ?? 0, now: row.now };
}

/**
 * Takes a call's place in its bucket: answers 0 when it may go now, or how many ms it must wait for the place it
 * now holds. A call that comes back at its place goes without asking again, unless a provider's pause began after
 * the place was given (it then queues anew after the pause).
 */
export async function takeTurn(
  pool: Pool,
  t: { callKey: string; bucket: string; limit: RateLimit; cost: RateCost },
): Promise<number> {
  return inTransaction(pool, async (db) => {
    const { state, paused, now } = await lockBucket(db, t.bucket);
    const { rows } = await db.query<{ at: number }>(
      `DELETE FROM rate_places WHERE call_key = $1 RETURNING (extract(epoch FROM at) * 1000)::float8 AS at`,
      [t.callKey],
    );
    const held = rows[0]?.at;
    if (held !== undefined && held > now) {
      await db.query('INSERT INTO rate_places (call_key, bucket, at) VALUES ($1, $2, to_timestamp($3 / 1000.0))', [
        t.callKey,
        t.bucket,
        held,
      ]);
      return Math.ceil(held - now);
    }
    if (held !== undefined && !(paused > now && held < paused)) return 0;
    const place = takePlace(state, t.limit, t.cost, now, paused);
    await db.query('UPDATE rate_buckets SET state = $2 WHERE bucket = $1', [t.bucket, place.state]);
    // Places of calls that never came back (their run was cancelled) are only rows: they hold no capacity.
    await db.query(`DELETE FROM rate_places WHERE taken_at < now() - interval '1 hour'`);
    if (place.at <= now) return 0;
    await db.query('INSERT INTO rate_places (call_key, bucket, at) VALUES ($1, $2, to_timestamp($3 / 1000.0))', [
      t.callKey,
      t.bucket,
      place.at,
    ]);
    return Math.ceil(place.at - now);
  });
}

/** A provider's 429 asked for this long: no call of the bucket goes before it has passed. */
export async function pauseBucket(db: Queryable, bucket: string, ms: number): Promise<void> {
  await db.query(
    `INSERT INTO rate_buckets (bucket, paused_until) VALUES ($1, clock_timestamp() + make_interval(secs => $2))
     ON CONFLICT (bucket) DO UPDATE SET paused_until =
       greatest(coalesce(rate_buckets.paused_until, '-infinity'), EXCLUDED.paused_until)`,
    [bucket, ms / 1000],
  );
}

/** After a call: gives its bucket back what it took beyond what it used (max_tokens beyond the answer's output). */
export async function settleBucket(
  pool: Pool,
  bucket: string,
  limit: RateLimit,
  unused: Partial<RateCost>,
): Promise<void> {
  await inTransaction(pool, async (db) => {
    const { state } = await lockBucket(db, bucket);
    await db.query('UPDATE rate_buckets SET state = $2 WHERE bucket = $1', [bucket, adjust(state, limit, unused)]);
  });
}
