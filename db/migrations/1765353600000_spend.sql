-- Up Migration

-- Spend control (docs/spend.md). Each model call's reservation and usage, under its idempotency key: a retry of the
-- same call reserves and settles the same row, so it is counted once per call that reached the model.
CREATE TABLE model_spend (
  call_key              text PRIMARY KEY,
  agent_id              text NOT NULL REFERENCES agents(id),
  kind                  text NOT NULL
                        CHECK (kind IN ('turn', 'delegate', 'job', 'routine', 'authoring', 'reflection', 'gate', 'judge')),
  model                 text NOT NULL,
  conversation_key      text,
  turn_id               text,
  delegate_id           text,
  root_conversation_key text,
  job_id                text,
  job_run_id            text,
  routine_run_id        text,
  proposal_id           text,
  -- The worst case held before the call, until it settles; a hold older than RESERVATION_HOLD_MS stops counting.
  held_usd              numeric NOT NULL DEFAULT 0 CHECK (held_usd >= 0),
  held_at               timestamptz,
  -- The worst case last reserved for it, kept after it settles (what the call was allowed to cost).
  reserved_usd          numeric NOT NULL DEFAULT 0,
  cost_usd              numeric NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
  input_tokens          bigint NOT NULL DEFAULT 0,
  output_tokens         bigint NOT NULL DEFAULT 0,
  cache_read_tokens     bigint NOT NULL DEFAULT 0,
  cache_write_tokens    bigint NOT NULL DEFAULT 0,
  -- The attempts that settled: one attempt's answer is never counted twice.
  settled_attempts      integer[] NOT NULL DEFAULT '{}',
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX model_spend_by_agent ON model_spend (agent_id, created_at);
CREATE INDEX model_spend_by_turn ON model_spend (turn_id) WHERE turn_id IS NOT NULL;
CREATE INDEX model_spend_by_delegate ON model_spend (delegate_id) WHERE delegate_id IS NOT NULL;
CREATE INDEX model_spend_by_job_run ON model_spend (job_run_id) WHERE job_run_id IS NOT NULL;
CREATE INDEX model_spend_by_routine_run ON model_spend (routine_run_id) WHERE routine_run_id IS NOT NULL;

-- An agent's budgets in USD ({dailyUsd, monthlyUsd, perTurnUsd, perDelegateTreeUsd, perJobRunUsd, perRoutineRunUsd}).
ALTER TABLE agents ADD COLUMN budgets jsonb NOT NULL DEFAULT '{}';

-- A delegate waiting for a budget to be raised: the budget's words (null while it works).
ALTER TABLE delegates ADD COLUMN budget_blocked text;

-- A turn that a budget stopped before its model call.
ALTER TABLE turns DROP CONSTRAINT turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check
  CHECK (status IN ('queued', 'running', 'replied', 'skipped', 'error', 'interrupted', 'budget_exhausted'));

-- Down Migration
ALTER TABLE turns DROP CONSTRAINT turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check
  CHECK (status IN ('queued', 'running', 'replied', 'skipped', 'error', 'interrupted'));
ALTER TABLE delegates DROP COLUMN budget_blocked;
ALTER TABLE agents DROP COLUMN budgets;
DROP TABLE model_spend;
