-- Up Migration

-- MCP tool servers a person configured for an agent (issue 26). Secrets (header values, environment) are sealed
-- (services/secrets.ts); only their names and fingerprints are readable. `tools` is the last listing, each tool with
-- its annotations; policies are a person's, applied over the annotations' defaults.
CREATE TABLE tool_servers (
  agent_id           text NOT NULL,
  name               text NOT NULL CHECK (name ~ '^[a-z0-9-]{1,32}$'),
  transport          text NOT NULL CHECK (transport IN ('http', 'stdio')),
  url                text,
  command            text,
  args               jsonb NOT NULL DEFAULT '[]',
  sealed_secrets     text,
  secret_fingerprints jsonb NOT NULL DEFAULT '{"headers": {}, "env": {}}',
  policies           jsonb NOT NULL DEFAULT '{}',
  default_policy     text CHECK (default_policy IN ('auto', 'approve', 'deny')),
  enabled            boolean NOT NULL DEFAULT true,
  tools              jsonb NOT NULL,
  tools_listed_at    timestamptz NOT NULL DEFAULT now(),
  -- Bumped by every change of how the server is reached: a worker's live session of an older version is not reused.
  version            integer NOT NULL DEFAULT 1,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, name),
  CHECK ((transport = 'http') = (url IS NOT NULL) AND (transport = 'stdio') = (command IS NOT NULL))
);

-- The tools a turn (or a delegate) was offered, pinned by their content hash: every model call and tool call of the
-- turn reads this list, never a live server, so a retry or a replay sees what the first attempt saw.
CREATE TABLE tool_lists (
  hash       text PRIMARY KEY,
  tools      jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE turn_tool_lists (
  transcript_key text NOT NULL,
  turn_id        text NOT NULL,
  hash           text NOT NULL REFERENCES tool_lists(hash),
  PRIMARY KEY (transcript_key, turn_id)
);

-- Each call of a server's tool: its idempotency key (also its effects-ledger key), what asked for it, the policy in
-- force, a person's decision, and its result (whole: the history carries a preview of a large one).
CREATE TABLE tool_calls (
  id               uuid PRIMARY KEY,
  key              text NOT NULL UNIQUE,
  agent_id         text NOT NULL,
  server           text NOT NULL,
  tool             text NOT NULL,
  model_name       text NOT NULL,
  arguments        jsonb NOT NULL,
  args_digest      text NOT NULL,
  origin           text NOT NULL CHECK (origin IN ('conversation', 'delegate')),
  transcript_key   text NOT NULL,
  conversation_key text NOT NULL,
  turn_id          text NOT NULL,
  delegate_id      text,
  tool_use_id      text NOT NULL,
  workflow_id      text NOT NULL,
  tools_hash       text NOT NULL,
  policy           text NOT NULL CHECK (policy IN ('auto', 'approve', 'deny')),
  retries_safely   boolean NOT NULL,
  -- prepared: recorded, its turn not yet waiting; awaiting_approval: in the inbox, its workflow waiting.
  status           text NOT NULL CHECK (status IN ('prepared', 'awaiting_approval', 'approved', 'running', 'ok', 'error',
                                                   'unknown', 'rejected', 'expired', 'cancelled', 'denied')),
  decided_by       text,
  note             text,
  result           text,
  result_bytes     integer,
  redactions       text[] NOT NULL DEFAULT '{}',
  failure          text,
  duration_ms      integer,
  created_at       timestamptz NOT NULL DEFAULT now(),
  waiting_since    timestamptz,
  expires_at       timestamptz,
  decided_at       timestamptz,
  started_at       timestamptz,
  finished_at      timestamptz
);
CREATE INDEX tool_calls_by_agent ON tool_calls (agent_id, created_at DESC, id);
CREATE INDEX tool_calls_waiting ON tool_calls (waiting_since) WHERE status = 'awaiting_approval';
CREATE INDEX tool_calls_by_turn ON tool_calls (transcript_key, turn_id);

-- A task may name the tool servers its delegate may use; NULL: all of the agent's.
ALTER TABLE tasks ADD COLUMN tool_servers text[];

-- Down Migration
ALTER TABLE tasks DROP COLUMN tool_servers;
DROP TABLE tool_calls;
DROP TABLE turn_tool_lists;
DROP TABLE tool_lists;
DROP TABLE tool_servers;
