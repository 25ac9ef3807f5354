-- Up Migration

-- The workflow told when the message's turn ends (a job's run, which waits for its turn by signal). Kept with the
-- message, so that a conversation run that takes the turn up from PostgreSQL (a new run racing the message's own
-- acceptance, or one started after a run was terminated) still tells it.
ALTER TABLE inbound_messages ADD COLUMN notify text;

-- Down Migration
ALTER TABLE inbound_messages DROP COLUMN notify;
