/**
 * Provider rate limits, as providers publish them: requests, input tokens and output tokens per minute, per provider
 * and model. Enforced before each call by a token bucket that every worker shares (db/rate-limits.ts holds its state
 * in PostgreSQL). Pure rules: the limits' shape, which limit a call meets, and when the bucket lets a call through.
 */
import { z } from 'zod';

const perMinute = z.number().int().positive().max(100_000_000);

/**
 * One model's limits. `burstSeconds` is the bucket's size in seconds' worth of each limit: 60 by default, the
 * provider's own (a full minute's allowance may go at once, then the bucket refills continuously).
 */
export const RateLimitSchema = z
  .object({
    requestsPerMinute: perMinute.optional(),
    inputTokensPerMinute: perMinute.optional(),
    outputTokensPerMinute: perMinute.optional(),
    burstSeconds: z.number().positive().max(60).optional(),
  })
  .strict()
  .refine((l) => l.requestsPerMinute ?? l.inputTokensPerMinute ?? l.outputTokensPerMinute, {
    message: 'a rate limit names at least one of requestsPerMinute, inputTokensPerMinute, outputTokensPerMinute',
  });
export type RateLimit = z.infer<typeof RateLimitSchema>;

/** KEEL_RATE_LIMITS: provider → model → limits; the model `*` stands for every model the provider has no entry for. */
export const RateLimitsSchema = z.record(z.string().min(1), z.record(z.string().min(1), RateLimitSchema));
export type RateLimits = z.infer<typeof RateLimitsSchema>;

/** The limit a call of this provider and model meets, and the bucket it shares (one per provider and model). */
export function rateLimitFor(
  limits: RateLimits,
  provider: string,
  model: string,
): { bucket: string; limit: RateLimit } | undefined {
  const models = limits[provider];
  const limit = models?.[model] ?? models?.['*'];
  return limit ? { bucket: `${provider}/${model}`, limit } : undefined;
}

/** What one call takes from its bucket: one request, its estimated input, and max_tokens of output. */
export interface RateCost {
  requests: number;
  inputTokens: number;
  outputTokens: number;
}

const DIMENSIONS = [
  ['requests', 'requestsPerMinute'],
  ['inputTokens', 'inputTokensPerMinute'],
  ['outputTokens', 'outputTokensPerMinute'],
] as const;
export type RateDimension = (typeof DIMENSIONS)[number][0];

/**
 * A bucket's state as theoretical arrival times (GCRA): per dimension, the instant (ms) at which everything taken so
 * far will have drained. A bucket is full when that instant is now or past.
 */
export type BucketState = Partial<Record<RateDimension, number>>;

/**
 * When a call may go, and the bucket's state once it has taken its place: the earliest instant at or after `now`
 * (and after a provider's pause) when every dimension has room for its cost. A cost larger than a whole bucket
 * goes when the bucket is empty rather than never. Calls take places in the order they ask, so a burst queues
 * instead of waking together.
 */
export function takePlace(
  state: BucketState,
  limit: RateLimit,
  cost: RateCost,
  now: number,
  pausedUntil = 0,
): { at: number; state: BucketState } {
  const burst = (limit.burstSeconds ?? 60) / 60;
  let at = Math.max(now, pausedUntil);
  for (const [dim, key] of DIMENSIONS) {
    const perMinute = limit[key];
    if (!perMinute) continue;
    const msPerUnit = 60_000 / perMinute;
    const size = burst * perMinute;
    const tat = Math.max(state[dim] ?? 0, now);
    at = Math.max(at, tat + (Math.min(cost[dim], size) - size) * msPerUnit);
  }
  const next: BucketState = { ...state };
  for (const [dim, key] of DIMENSIONS) {
    const perMinute = limit[key];
    if (!perMinute) continue;
    next[dim] = Math.max(state[dim] ?? 0, at) + cost[dim] * (60_000 / perMinute);
  }
  return { at, state: next };
}

/** Gives back what a call took beyond what it used (or takes what it used beyond its estimate). */
export function adjust(state: BucketState, limit: RateLimit, unused: Partial<RateCost>): BucketState {
  const next: BucketState = { ...state };
  for (const [dim, key] of DIMENSIONS) {
    const perMinute = limit[key];
    const delta = unused[dim];
    if (!perMinute || !delta || next[dim] === undefined) continue;
    next[dim] = next[dim] - delta * (60_000 / perMinute);
  }
  return next;
}
