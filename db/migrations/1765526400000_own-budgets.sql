-- Up Migration

-- A job's or a routine's own budget for each of its runs, in USD: it replaces the agent's perJobRunUsd or
-- perRoutineRunUsd for that job's or routine's runs (null: the agent's applies).
ALTER TABLE jobs ADD COLUMN budget_usd numeric CHECK (budget_usd >= 0);
ALTER TABLE routines ADD COLUMN budget_usd numeric CHECK (budget_usd >= 0);

-- A job run waiting for a budget to be raised: the budget's words (null while it works).
ALTER TABLE job_runs ADD COLUMN budget_blocked text;

-- Down Migration
ALTER TABLE job_runs DROP COLUMN budget_blocked;
ALTER TABLE routines DROP COLUMN budget_usd;
ALTER TABLE jobs DROP COLUMN budget_usd;
