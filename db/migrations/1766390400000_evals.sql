-- Up Migration

-- Evaluations (docs/evals.md): a suite of cases run against a candidate configuration of an agent, never applied to
-- the agent itself. One row per evaluation; its cases and their turns below.
CREATE TABLE evals (
  id          uuid PRIMARY KEY,
  agent_id    text NOT NULL REFERENCES agents(id),
  mode        text NOT NULL CHECK (mode IN ('replay', 'live-model')),
  candidate   jsonb NOT NULL,
  -- The agent's configuration as the evaluation began, alone and under the candidate: every turn reads these.
  configs     jsonb NOT NULL,
  suite       text,
  status      text NOT NULL CHECK (status IN ('running', 'finished', 'failed')),
  summary     jsonb,
  actor       text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE INDEX evals_by_agent ON evals (agent_id, created_at DESC);

-- A case as it was taken (a recorded conversation's turns, or a written case), and its verdict once scored.
CREATE TABLE eval_cases (
  eval_id    uuid NOT NULL REFERENCES evals(id) ON DELETE CASCADE,
  case_id    text NOT NULL,
  position   integer NOT NULL,
  source     text NOT NULL CHECK (source IN ('recorded', 'written')),
  spec       jsonb NOT NULL,
  status     text NOT NULL CHECK (status IN ('pending', 'passed', 'failed')),
  result     jsonb,
  PRIMARY KEY (eval_id, case_id)
);

-- Each turn of a case as the candidate ran it; a retried step finds its turn written.
CREATE TABLE eval_turns (
  eval_id    uuid NOT NULL,
  case_id    text NOT NULL,
  turn_index integer NOT NULL,
  result     jsonb NOT NULL,
  PRIMARY KEY (eval_id, case_id, turn_index),
  FOREIGN KEY (eval_id, case_id) REFERENCES eval_cases (eval_id, case_id) ON DELETE CASCADE
);

-- A live-model evaluation's answers and a judge's, under their spend key: a retried step reads the answer it paid for.
CREATE TABLE eval_model_answers (
  call_key   text PRIMARY KEY,
  eval_id    uuid NOT NULL,
  case_id    text NOT NULL,
  content    jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (eval_id, case_id) REFERENCES eval_cases (eval_id, case_id) ON DELETE CASCADE
);

-- A conversation forked from turn k of another, run under a candidate; its tools' effects are dry runs unless a
-- person enabled them, tool by tool.
CREATE TABLE conversation_forks (
  conversation_key text PRIMARY KEY REFERENCES conversations(key),
  source_key       text NOT NULL,
  at_turn          integer NOT NULL CHECK (at_turn >= 1),
  candidate        jsonb NOT NULL,
  enabled_tools    jsonb NOT NULL DEFAULT '[]',
  created_at       timestamptz NOT NULL DEFAULT now()
);

-- A live-model evaluation's calls are metered like any other.
ALTER TABLE model_spend DROP CONSTRAINT model_spend_kind_check;
ALTER TABLE model_spend ADD CONSTRAINT model_spend_kind_check
  CHECK (kind IN ('turn', 'delegate', 'job', 'routine', 'authoring', 'reflection', 'gate', 'judge', 'eval'));

-- Down Migration
ALTER TABLE model_spend DROP CONSTRAINT model_spend_kind_check;
ALTER TABLE model_spend ADD CONSTRAINT model_spend_kind_check
  CHECK (kind IN ('turn', 'delegate', 'job', 'routine', 'authoring', 'reflection', 'gate', 'judge'));
DROP TABLE conversation_forks;
DROP TABLE eval_model_answers;
DROP TABLE eval_turns;
DROP TABLE eval_cases;
DROP TABLE evals;
