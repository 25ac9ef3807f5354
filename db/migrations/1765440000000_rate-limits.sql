-- Up Migration

-- Provider rate limits shared by every worker (docs/spend.md): one token bucket per provider and model, kept as
-- its theoretical arrival times in ms ({requests, inputTokens, outputTokens}), and the pause a 429 asked for.
CREATE TABLE rate_buckets (
  bucket       text PRIMARY KEY,
  state        jsonb NOT NULL DEFAULT '{}',
  paused_until timestamptz
);

-- A call's place in its bucket's queue, taken once: its retry at that instant goes without asking again, so a burst
-- is served in order instead of waking together. A place whose call never came back is dropped after an hour.
CREATE TABLE rate_places (
  call_key  text PRIMARY KEY,
  bucket    text NOT NULL REFERENCES rate_buckets(bucket),
  at        timestamptz NOT NULL,
  taken_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rate_places_by_taken ON rate_places (taken_at);

-- Down Migration
DROP TABLE rate_places;
DROP TABLE rate_buckets;
