-- Up Migration

-- A routine of an app: its schedule (a Temporal Schedule routine:<agentId>:<appId>:<slug> fires it), prompt and
-- playbook rule. Runs never write the routine's definition, so an edit during a run stands.
CREATE TABLE routines (
  agent_id    text NOT NULL,
  app_id      text NOT NULL,
  slug        text NOT NULL,
  label       text NOT NULL,
  schedule    jsonb NOT NULL,
  cron        text NOT NULL,
  prompt      text,
  playbook    text,
  delivery    jsonb,
  status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, app_id, slug),
  FOREIGN KEY (agent_id, app_id) REFERENCES apps(agent_id, app_id) ON DELETE CASCADE
);

-- Saved tools, every version kept. A run saves at most one version (authored_in_run is unique).
CREATE TABLE routine_tools (
  agent_id        text NOT NULL,
  app_id          text NOT NULL,
  name            text NOT NULL,
  version         integer NOT NULL,
  title           text NOT NULL,
  purpose         text NOT NULL,
  inputs          jsonb NOT NULL,
  code            text NOT NULL,
  authored_by     text NOT NULL,
  authored_in_run text UNIQUE,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, app_id, name, version),
  FOREIGN KEY (agent_id, app_id) REFERENCES apps(agent_id, app_id) ON DELETE CASCADE
);

-- One row per run. A run id is its workflow's run id: the workflow id (routine:…-<fire second>) can repeat when two
-- fires fall in the same second. At most one run of a routine is in flight.
CREATE TABLE routine_runs (
  run_id       text PRIMARY KEY,
  workflow_id  text NOT NULL,
  agent_id     text NOT NULL,
  app_id       text NOT NULL,
  slug         text NOT NULL,
  fired_at     timestamptz NOT NULL,
  status       text NOT NULL CHECK (status IN ('running', 'ok', 'needs_approval', 'rejected', 'error')),
  prompt       text,
  tool_name    text,
  tool_version integer,
  authored     boolean NOT NULL DEFAULT false,
  digest       text,
  session_id   text NOT NULL,
  gate         jsonb,
  decision     jsonb,
  artifact_id  text,
  finished_at  timestamptz
);
CREATE INDEX routine_runs_by_routine ON routine_runs (agent_id, app_id, slug, fired_at DESC);
CREATE UNIQUE INDEX routine_runs_one_in_flight ON routine_runs (agent_id, app_id, slug) WHERE status IN ('running', 'needs_approval');

-- The journal of a run's capability calls, in call order: a re-run after approval (or after a crash) returns these
-- results instead of calling again. A gated call is journaled as `gated` (with the target it was shown with) until
-- its approved execution records its outcome.
CREATE TABLE routine_calls (
  run_id     text NOT NULL REFERENCES routine_runs(run_id) ON DELETE CASCADE,
  seq        integer NOT NULL,
  capability text NOT NULL,
  args       jsonb NOT NULL,
  outcome    text NOT NULL CHECK (outcome IN ('ok', 'error', 'gated')),
  result     jsonb,
  error      text,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, seq)
);

-- One Markdown artifact per finished run, numbered per tool (or routine) without collisions.
CREATE TABLE routine_artifacts (
  artifact_id text PRIMARY KEY,
  agent_id    text NOT NULL,
  app_id      text NOT NULL,
  run_id      text NOT NULL UNIQUE,
  produced_by text NOT NULL,
  number      integer NOT NULL,
  title       text NOT NULL,
  content     text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (agent_id, app_id, produced_by, number),
  FOREIGN KEY (agent_id, app_id) REFERENCES apps(agent_id, app_id) ON DELETE CASCADE
);

-- Down Migration
DROP TABLE routine_artifacts;
DROP TABLE routine_calls;
DROP TABLE routine_runs;
DROP TABLE routine_tools;
DROP TABLE routines;
