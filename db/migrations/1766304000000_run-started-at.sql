-- Up Migration
-- When a job or routine run began, so that a run shows how long it took (finished_at - started_at). A run recorded
-- before this column began when it fired, as far as anything kept says.
ALTER TABLE job_runs ADD COLUMN started_at timestamptz;
UPDATE job_runs SET started_at = fired_at;
ALTER TABLE job_runs ALTER COLUMN started_at SET DEFAULT now(), ALTER COLUMN started_at SET NOT NULL;
ALTER TABLE routine_runs ADD COLUMN started_at timestamptz;
UPDATE routine_runs SET started_at = fired_at;
ALTER TABLE routine_runs ALTER COLUMN started_at SET DEFAULT now(), ALTER COLUMN started_at SET NOT NULL;

-- Down Migration
ALTER TABLE routine_runs DROP COLUMN started_at;
ALTER TABLE job_runs DROP COLUMN started_at;
