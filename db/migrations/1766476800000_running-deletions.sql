-- Up Migration
-- A deletion of an agent (conversation_id NULL) or of one conversation, from its request until its last step: while
-- its row is here the API refuses every write to what it deletes (api/deletion-guard.ts) and the agent is not
-- created again on first use. One runs at a time for each thing deleted; the deletion's last step removes the row.
CREATE TABLE running_deletions (
  deletion_id     uuid PRIMARY KEY,
  agent_id        text NOT NULL,
  conversation_id text,
  -- Who asked, as the audit trail records it: a DELETE asked again starts the same deletion if it is not running.
  actor           text NOT NULL,
  requested_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX running_deletions_one_each ON running_deletions (agent_id, COALESCE(conversation_id, ''));

-- Down Migration
DROP TABLE running_deletions;
