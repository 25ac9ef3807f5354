-- Up Migration

-- The agent's audit trail: every decision a person makes through the API (approvals, rejections, rollbacks,
-- destination changes), with a non-secret identity of the token that made it and when. `action` is an open set
-- (domain/audit.ts lists and documents the actions), so no CHECK: a new kind (budget changes) needs no migration.
CREATE TABLE audit_trail (
  id       bigserial PRIMARY KEY,
  agent_id text NOT NULL,
  action   text NOT NULL,
  -- `token:<first 12 hex digits of the token's SHA-256>`, or `dev` when the API runs without tokens.
  actor    text NOT NULL,
  -- What was acted on: a routine run id, a proposal id, a memory version, the agent.
  subject  text NOT NULL,
  detail   jsonb,
  at       timestamptz NOT NULL DEFAULT now()
);
-- The listing: one agent's entries, newest first, paged by id.
CREATE INDEX audit_trail_by_agent ON audit_trail (agent_id, id DESC);

-- Down Migration
DROP TABLE audit_trail;
