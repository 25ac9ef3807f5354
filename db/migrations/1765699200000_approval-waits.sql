-- Up Migration

-- When a wait for a person's decision began and when it ends, recorded as it begins by the code that knows its
-- length (the worker's configuration), so that the API, which does not have that configuration, never guesses it.
-- A routine run is handed its wait as it begins (approval_wait_ms); each stop at a gate records its own wait.
ALTER TABLE routine_runs
  ADD COLUMN approval_wait_ms    bigint CHECK (approval_wait_ms > 0),
  ADD COLUMN waiting_since       timestamptz,
  ADD COLUMN approval_expires_at timestamptz;
-- A proposal waits from its record (created_at) until this.
ALTER TABLE proposals ADD COLUMN approval_expires_at timestamptz;

-- The pending approvals, oldest first, of one agent or of every agent: few rows, found without reading the rest.
CREATE INDEX routine_runs_waiting ON routine_runs (waiting_since) WHERE status = 'needs_approval';
CREATE INDEX proposals_waiting ON proposals (created_at) WHERE status = 'awaiting_approval';
-- An agent's delegates, newest first.
CREATE INDEX delegates_by_agent ON delegates (agent_id, created_at DESC, delegate_id DESC);

-- Down Migration
DROP INDEX delegates_by_agent;
DROP INDEX proposals_waiting;
DROP INDEX routine_runs_waiting;
ALTER TABLE proposals DROP COLUMN approval_expires_at;
ALTER TABLE routine_runs DROP COLUMN approval_expires_at, DROP COLUMN waiting_since, DROP COLUMN approval_wait_ms;
