-- Up Migration

CREATE TABLE jobs (
  id                    text PRIMARY KEY,
  agent_id              text NOT NULL REFERENCES agents(id),
  name                  text NOT NULL,
  description           text,
  schedule              jsonb NOT NULL,
  task                  text NOT NULL,
  delivery              jsonb NOT NULL,
  delete_after_run      boolean NOT NULL DEFAULT false,
  created_by            text NOT NULL CHECK (created_by IN ('agent', 'user')),
  status                text NOT NULL CHECK (status IN ('active', 'paused', 'completed', 'failed')),
  next_run_at           timestamptz,
  run_count             integer NOT NULL DEFAULT 0,
  consecutive_errors    integer NOT NULL DEFAULT 0,
  last_run_at           timestamptz,
  last_run_status       text,
  last_run_duration_ms  integer,
  last_run_error        text,
  last_delivery_outcome text,
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now()
);
-- Names are unique per agent ignoring case.
CREATE UNIQUE INDEX jobs_name_ci ON jobs (agent_id, lower(name));

-- One row per fire: skipped fires are recorded too, never reported as completed.
CREATE TABLE job_runs (
  run_id            text PRIMARY KEY,
  job_id            text NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  fired_at          timestamptz NOT NULL,
  status            text NOT NULL CHECK (status IN ('running', 'ok', 'error', 'skipped')),
  attempts          integer NOT NULL DEFAULT 0,
  reply             text,
  error             text,
  delivery_outcome  text,
  delivery_attempts integer NOT NULL DEFAULT 0,
  finished_at       timestamptz
);
CREATE INDEX job_runs_by_job ON job_runs (job_id, fired_at);
-- At most one running fire per job: a fire while another runs is recorded as skipped.
CREATE UNIQUE INDEX job_runs_one_running ON job_runs (job_id) WHERE status = 'running';

-- An audit record for every change to a job (who, what, when).
CREATE TABLE job_audit (
  id       bigserial PRIMARY KEY,
  job_id   text NOT NULL,
  agent_id text NOT NULL,
  action   text NOT NULL,
  actor    text NOT NULL,
  detail   jsonb,
  at       timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE job_audit;
DROP TABLE job_runs;
DROP TABLE jobs;
