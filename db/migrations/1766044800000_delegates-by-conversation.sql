-- Up Migration
-- A fresh conversation run asks whether any delegate of its conversation needs admission or relay
-- (db/admissions.ts hasDelegateWork); the partial indexes answer only some of that question.
CREATE INDEX delegates_by_conversation ON delegates (conversation_key);

-- Down Migration
DROP INDEX delegates_by_conversation;
