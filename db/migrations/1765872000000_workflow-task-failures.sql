-- Up Migration

-- Workflow tasks that failed, as the workers saw them (issue 24): one row per workflow run, with how often its task
-- failed and why the last time. /metrics sums them; the console warns of an agent's runs that keep failing.
CREATE TABLE workflow_task_failures (
  run_id text PRIMARY KEY,
  workflow_id text NOT NULL,
  workflow_type text NOT NULL,
  agent_id text,
  cause text NOT NULL CHECK (cause IN ('nondeterminism', 'error')),
  failures integer NOT NULL,
  last_message text NOT NULL,
  first_at timestamptz NOT NULL DEFAULT now(),
  last_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workflow_task_failures_by_agent ON workflow_task_failures (agent_id, last_at DESC);

-- Down Migration
DROP TABLE workflow_task_failures;
