import { describe, expect, it } from 'vitest';
import { adjust, rateLimitFor, takePlace, type BucketState, type RateLimit } from '../../domain/rate-limits';
import { loadConfig } from '../../domain/config';

const call = { requests: 1, inputTokens: 1_000, outputTokens: 500 };

/** Takes places for `n` calls asking at the same instant, one after another, as the bucket's row lock orders them. */
function placesOf(limit: RateLimit, n: number, now = 0, pausedUntil = 0): number[] {
  let state: BucketState = {};
  const at: number[] = [];
  for (let i = 0; i < n; i++) {
    const place = takePlace(state, limit, call, now, pausedUntil);
    state = place.state;
    at.push(place.at);
  }
  return at;
}

describe('a shared rate-limit bucket', () => {
  it("lets a minute's allowance go at once, then one request per 60/limit seconds", () => {
    expect(placesOf({ requestsPerMinute: 3 }, 5)).toEqual([0, 0, 0, 20_000, 40_000]);
  });

  it('with a one-second burst, queues a burst of calls one second apart', () => {
    expect(placesOf({ requestsPerMinute: 60, burstSeconds: 1 }, 4)).toEqual([0, 1_000, 2_000, 3_000]);
  });

  it('holds every dimension: input tokens per minute decide when they are the tighter limit', () => {
    // 2,000 input tokens a minute: two calls of 1,000 fill it; the third waits for 1,000 to drain (30 s).
    expect(placesOf({ requestsPerMinute: 100, inputTokensPerMinute: 2_000 }, 3)).toEqual([0, 0, 30_000]);
    // Output is taken at max_tokens: 1,000 a minute allows two calls of 500.
    expect(placesOf({ outputTokensPerMinute: 1_000 }, 3)).toEqual([0, 0, 30_000]);
  });

  it('lets a call larger than the whole bucket go once the bucket is empty, not never', () => {
    expect(placesOf({ inputTokensPerMinute: 600 }, 2)).toEqual([0, 100_000]);
  });

  it("after a provider's pause, queues from the pause's end", () => {
    expect(placesOf({ requestsPerMinute: 60, burstSeconds: 1 }, 2, 0, 5_000)).toEqual([5_000, 6_000]);
  });

  it('gives back what a call took beyond what it used', () => {
    const limit = { outputTokensPerMinute: 1_000 };
    const full = takePlace(takePlace({}, limit, call, 0).state, limit, call, 0).state;
    expect(takePlace(full, limit, call, 0).at).toBe(30_000);
    // The first answer used 100 of its 500: 400 tokens come back, so the third call waits 6 s instead of 30.
    expect(takePlace(adjust(full, limit, { outputTokens: 400 }), limit, call, 0).at).toBe(6_000);
  });

  it('refills: a call after the bucket drained goes at once', () => {
    const limit = { requestsPerMinute: 60, burstSeconds: 1 };
    const { state } = takePlace({}, limit, call, 0);
    expect(takePlace(state, limit, call, 999).at).toBe(1_000);
    expect(takePlace(state, limit, call, 5_000).at).toBe(5_000);
  });
});

describe('KEEL_RATE_LIMITS', () => {
  it("finds a model's own limit, else the provider's *, one bucket per provider and model", () => {
    const limits = { anthropic: { 'claude-haiku-4-5': { requestsPerMinute: 50 }, '*': { requestsPerMinute: 5 } } };
    expect(rateLimitFor(limits, 'anthropic', 'claude-haiku-4-5')).toEqual({
      bucket: 'anthropic/claude-haiku-4-5',
      limit: { requestsPerMinute: 50 },
    });
    expect(rateLimitFor(limits, 'anthropic', 'claude-opus-4-5')).toEqual({
      bucket: 'anthropic/claude-opus-4-5',
      limit: { requestsPerMinute: 5 },
    });
    expect(rateLimitFor(limits, 'scripted', 'scripted')).toBeUndefined();
  });

  it('is read from the environment, and a bad one is refused naming the variable and what is wrong', () => {
    const raw = '{"anthropic": {"*": {"requestsPerMinute": 50, "outputTokensPerMinute": 8000}}}';
    expect(loadConfig({ KEEL_RATE_LIMITS: raw }).rateLimits).toEqual({
      anthropic: { '*': { requestsPerMinute: 50, outputTokensPerMinute: 8000 } },
    });
    expect(loadConfig({}).rateLimits).toBeUndefined();
    expect(() => loadConfig({ KEEL_RATE_LIMITS: '{"anthropic": {"*": {"requestsPerMinute": -1}}}' })).toThrow(
      /^invalid configuration:\nKEEL_RATE_LIMITS: anthropic\.\*\.requestsPerMinute: Too small: .*\(it takes a JSON /,
    );
    expect(() => loadConfig({ KEEL_RATE_LIMITS: '{"anthropic": {"*": {}}}' })).toThrow(
      /a rate limit names at least one of requestsPerMinute/,
    );
  });
});
