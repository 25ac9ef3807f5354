-- Up Migration

-- Every version of an agent's memory keeps the full content of every file. A version is made by the first use
-- (initial), an admitted proposal, or a rollback (equal to an earlier version).
CREATE TABLE memory_versions (
  agent_id     text NOT NULL REFERENCES agents(id),
  version      integer NOT NULL,
  files        jsonb NOT NULL,
  kind         text NOT NULL CHECK (kind IN ('initial', 'proposal', 'rollback')),
  proposal_id  text,
  changes      jsonb NOT NULL DEFAULT '[]',
  learned_from jsonb NOT NULL DEFAULT '[]',
  rollback_of  integer,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, version)
);
CREATE UNIQUE INDEX memory_versions_one_per_proposal ON memory_versions (proposal_id) WHERE proposal_id IS NOT NULL;

-- Every proposal of a drain, with the result of every check; admitted or rejected whole.
CREATE TABLE proposals (
  id               text PRIMARY KEY,
  agent_id         text NOT NULL REFERENCES agents(id),
  workflow_id      text NOT NULL,
  status           text NOT NULL CHECK (status IN ('skipped', 'admitted', 'rejected', 'awaiting_approval', 'poisoned')),
  answer           jsonb NOT NULL,
  checks           jsonb NOT NULL DEFAULT '[]',
  base_version     integer NOT NULL,
  version          integer,
  tier             text,
  conversation_ids jsonb NOT NULL DEFAULT '[]',
  decision         jsonb,
  created_at       timestamptz NOT NULL DEFAULT now(),
  decided_at       timestamptz
);
CREATE INDEX proposals_by_agent ON proposals (agent_id, created_at DESC);

-- Summaries whose proposals failed the hard gates three times: never drained again.
CREATE TABLE reflection_poison (
  agent_id        text NOT NULL REFERENCES agents(id),
  conversation_id text NOT NULL,
  summary         jsonb NOT NULL,
  failures        integer NOT NULL,
  proposal_id     text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, conversation_id, created_at)
);

-- Every decision of the "worth learning?" gate.
CREATE TABLE reflection_gate_log (
  agent_id        text NOT NULL REFERENCES agents(id),
  conversation_id text NOT NULL,
  turn_id         text NOT NULL,
  evolve          boolean NOT NULL,
  reason          text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, turn_id)
);

-- What reflection's model calls cost, for the daily ceiling. One row per call (idempotent by call key).
CREATE TABLE reflection_costs (
  call_key   text PRIMARY KEY,
  agent_id   text NOT NULL REFERENCES agents(id),
  purpose    text NOT NULL,
  model      text NOT NULL,
  usage      jsonb NOT NULL,
  cost_usd   numeric NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reflection_costs_by_day ON reflection_costs (agent_id, created_at);

-- Down Migration
DROP TABLE reflection_costs;
DROP TABLE reflection_gate_log;
DROP TABLE reflection_poison;
DROP TABLE proposals;
DROP TABLE memory_versions;
