-- Up Migration

CREATE TABLE agents (
  id                 text PRIMARY KEY,
  name               text NOT NULL,
  model              text,
  system_prompt      text,
  owner_delivery     jsonb,
  reflection_enabled boolean NOT NULL DEFAULT false,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);

-- A conversation's key is its workflow id, conv:<agentId>:<conversationId>.
CREATE TABLE conversations (
  key              text PRIMARY KEY,
  agent_id         text NOT NULL REFERENCES agents(id),
  conversation_id  text NOT NULL,
  default_delivery jsonb,
  last_seq         integer NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (agent_id, conversation_id)
);

-- Every accepted inbound message, once per messageId: the idempotency record of submission.
CREATE TABLE inbound_messages (
  conversation_key text NOT NULL REFERENCES conversations(key),
  message_id       text NOT NULL,
  turn_id          text NOT NULL,
  text             text NOT NULL,
  author           text,
  mode             text NOT NULL CHECK (mode IN ('queue', 'steer', 'interrupt')),
  delivery         jsonb,
  accepted_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conversation_key, message_id)
);

CREATE TABLE turns (
  turn_id           text PRIMARY KEY,
  -- Order of acceptance, for taking up open turns in order after a run ended abnormally.
  accepted_order    bigserial NOT NULL,
  conversation_key  text NOT NULL REFERENCES conversations(key),
  message_id        text NOT NULL,
  status            text NOT NULL CHECK (status IN ('queued', 'running', 'replied', 'skipped', 'error', 'interrupted')),
  delivery          jsonb NOT NULL,
  reply_seq         integer,
  error             jsonb,
  model_calls       integer NOT NULL DEFAULT 0,
  created_at        timestamptz NOT NULL DEFAULT now(),
  started_at        timestamptz,
  finished_at       timestamptz
);
CREATE INDEX turns_by_conversation ON turns (conversation_key, created_at);

-- The transcript. seq is per conversation; origin makes appends idempotent under activity retries.
CREATE TABLE messages (
  conversation_key text NOT NULL REFERENCES conversations(key),
  seq              integer NOT NULL,
  role             text NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
  content          jsonb NOT NULL,
  text             text NOT NULL DEFAULT '',
  turn_id          text,
  origin           text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conversation_key, seq),
  UNIQUE (conversation_key, origin)
);

-- The effects ledger: every external effect is written here, with its idempotency key, before it is sent.
CREATE TABLE effects (
  key         text PRIMARY KEY,
  kind        text NOT NULL,
  status      text NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
  request     jsonb NOT NULL,
  result      jsonb,
  attempts    integer NOT NULL DEFAULT 0,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE deliveries (
  effect_key       text PRIMARY KEY REFERENCES effects(key),
  conversation_key text REFERENCES conversations(key),
  turn_id          text,
  channel          text NOT NULL,
  target           jsonb NOT NULL,
  text             text NOT NULL,
  outcome          text,
  attempts         integer NOT NULL DEFAULT 0,
  last_error       text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);

-- One row per model call attempt that reached the provider and answered.
CREATE TABLE model_calls (
  id                 bigserial PRIMARY KEY,
  conversation_key   text NOT NULL,
  turn_id            text NOT NULL,
  call_index         integer NOT NULL,
  attempt            integer NOT NULL,
  provider           text NOT NULL,
  model              text NOT NULL,
  stop_reason        text,
  input_tokens       integer NOT NULL DEFAULT 0,
  output_tokens      integer NOT NULL DEFAULT 0,
  cache_read_tokens  integer NOT NULL DEFAULT 0,
  cache_write_tokens integer NOT NULL DEFAULT 0,
  duration_ms        integer NOT NULL,
  error              text,
  created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX model_calls_by_turn ON model_calls (turn_id, call_index);

-- Exact responses a test or a demo queued for the scripted model, consumed in order per conversation.
CREATE TABLE scripted_responses (
  id               bigserial PRIMARY KEY,
  conversation_key text NOT NULL,
  response         jsonb NOT NULL,
  consumed_by      text UNIQUE,
  created_at       timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE scripted_responses;
DROP TABLE model_calls;
DROP TABLE deliveries;
DROP TABLE effects;
DROP TABLE messages;
DROP TABLE turns;
DROP TABLE inbound_messages;
DROP TABLE conversations;
DROP TABLE agents;
