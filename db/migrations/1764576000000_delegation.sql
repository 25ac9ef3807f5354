-- Up Migration

CREATE TABLE skills (
  agent_id   text NOT NULL REFERENCES agents(id),
  name       text NOT NULL,
  body       text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, name)
);
CREATE UNIQUE INDEX skills_name_ci ON skills (agent_id, lower(name));

CREATE TABLE tasks (
  agent_id           text NOT NULL REFERENCES agents(id),
  number             integer NOT NULL,
  title              text NOT NULL,
  description        text NOT NULL DEFAULT '',
  status             text NOT NULL CHECK (status IN ('pending_approval', 'backlog', 'ready', 'in_progress', 'done', 'failed')),
  required_skills    text[] NOT NULL DEFAULT '{}',
  history_mode       text NOT NULL DEFAULT 'fork' CHECK (history_mode IN ('clean', 'fork')),
  wall_clock_seconds integer NOT NULL DEFAULT 1800,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, number)
);

CREATE TABLE task_comments (
  id          bigserial PRIMARY KEY,
  agent_id    text NOT NULL,
  task_number integer NOT NULL,
  delegate_id text,
  body        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (agent_id, task_number) REFERENCES tasks(agent_id, number)
);

-- A delegate and, once it ends, its one terminal outcome (written by a single conditional UPDATE).
CREATE TABLE delegates (
  delegate_id        text PRIMARY KEY,
  agent_id           text NOT NULL REFERENCES agents(id),
  conversation_key   text NOT NULL REFERENCES conversations(key),
  task_number        integer,
  task_text          text NOT NULL,
  history_mode       text NOT NULL CHECK (history_mode IN ('clean', 'fork')),
  wall_clock_seconds integer NOT NULL,
  lifecycle          text NOT NULL DEFAULT 'running',
  status_text        text,
  outcome_kind       text CHECK (outcome_kind IN ('success', 'partial', 'timeout', 'blocked', 'cancelled', 'failed')),
  result             text,
  outcome_version    integer NOT NULL DEFAULT 0,
  transcript_version integer NOT NULL DEFAULT 0,
  terminal_owner     text CHECK (terminal_owner IN ('delegate', 'cancel', 'timeout', 'reconcile')),
  completed_at       timestamptz,
  admitted_version   integer NOT NULL DEFAULT 0,
  admitted_at        timestamptz,
  relay              text CHECK (relay IN ('relayed', 'relay_failed', 'noted')),
  created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX delegates_live ON delegates (conversation_key) WHERE completed_at IS NULL;
CREATE INDEX delegates_unadmitted ON delegates (conversation_key) WHERE completed_at IS NOT NULL AND admitted_version < outcome_version;

CREATE TABLE task_attempts (
  agent_id    text NOT NULL,
  task_number integer NOT NULL,
  attempt     integer NOT NULL,
  delegate_id text NOT NULL REFERENCES delegates(delegate_id),
  started_at  timestamptz NOT NULL DEFAULT now(),
  ended_at    timestamptz,
  outcome     text,
  summary     text,
  PRIMARY KEY (agent_id, task_number, attempt),
  FOREIGN KEY (agent_id, task_number) REFERENCES tasks(agent_id, number)
);
-- One open attempt per task: the database settles a race between two claims.
CREATE UNIQUE INDEX task_attempts_one_open ON task_attempts (agent_id, task_number) WHERE ended_at IS NULL;

-- Every admission decision the conversation made about a delegate's outcome signal (operators read these).
CREATE TABLE delegate_admissions (
  id              bigserial PRIMARY KEY,
  delegate_id     text NOT NULL REFERENCES delegates(delegate_id),
  outcome_version integer NOT NULL,
  decision        text NOT NULL,
  via             text NOT NULL CHECK (via IN ('signal', 'reconcile')),
  -- The admission call that made the decision: a retried call returns what it admitted before.
  batch           text NOT NULL,
  at              timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE delegate_admissions;
DROP TABLE task_attempts;
DROP TABLE delegates;
DROP TABLE task_comments;
DROP TABLE tasks;
DROP TABLE skills;
