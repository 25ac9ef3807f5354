-- Up Migration

-- A conversation's finished events, in order, for live streams and their resumption (Last-Event-ID). Streamed text
-- deltas are not kept: they travel by NOTIFY alone, outside workflow history and outside this table.
CREATE TABLE conversation_events (
  id               bigserial PRIMARY KEY,
  conversation_key text NOT NULL,
  type             text NOT NULL,
  data             jsonb NOT NULL,
  -- Makes publishing idempotent under activity retries.
  dedupe_key       text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (conversation_key, dedupe_key)
);
CREATE INDEX conversation_events_by_key ON conversation_events (conversation_key, id);

-- Down Migration
DROP TABLE conversation_events;
