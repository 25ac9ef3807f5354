-- Up Migration
-- A transcript append in one round trip (db/conversations.ts appendTranscriptEntries). The conversation's row is
-- locked first; the entries not there yet are then added after its last seq. Each statement of a plpgsql function
-- reads a fresh snapshot, so an entry another transaction added while this one waited for the lock is found, never
-- added twice. Answers each entry's origin, its seq, and whether this call added it.
CREATE FUNCTION keel_append_transcript(p_key text, p_turn_id text, p_entries jsonb)
  RETURNS TABLE (origin text, seq integer, added boolean)
  LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  PERFORM 1 FROM conversations WHERE key = p_key FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'conversation % is not recorded', p_key USING ERRCODE = 'no_data_found';
  END IF;
  RETURN QUERY
    WITH input AS (
      SELECT * FROM jsonb_to_recordset(p_entries) AS x(i integer, role text, content jsonb, text text, origin text)),
    found AS (
      SELECT m.origin, m.seq FROM messages m
      WHERE m.conversation_key = p_key AND m.origin IN (SELECT input.origin FROM input)),
    fresh AS (
      SELECT f.*, row_number() OVER (ORDER BY f.i) AS n, count(*) OVER () AS total
      FROM (SELECT DISTINCT ON (input.origin) * FROM input
            WHERE input.origin NOT IN (SELECT found.origin FROM found) ORDER BY input.origin, input.i) f),
    bump AS (
      UPDATE conversations SET last_seq = last_seq + (SELECT count(*) FROM fresh)
      WHERE key = p_key AND EXISTS (SELECT 1 FROM fresh) RETURNING last_seq),
    inserted AS (
      INSERT INTO messages AS m (conversation_key, seq, role, content, text, turn_id, origin)
      SELECT p_key, (b.last_seq - f.total + f.n)::integer, f.role, f.content, f.text, p_turn_id, f.origin
      FROM fresh f, bump b
      RETURNING m.origin, m.seq)
    SELECT inserted.origin, inserted.seq, true FROM inserted
    UNION ALL SELECT found.origin, found.seq, false FROM found;
END $$;

-- A conversation event recorded and announced (db/events.ts publishEvent), as a function so that a step's statement
-- can publish its event in the same round trip. The lock, held until commit, makes the events of one conversation
-- commit in the order of their ids, so a stream that has read up to an id never finds a smaller one committed later;
-- once per dedupe key; the NOTIFY carries the event as jsonb renders it, or its id alone when too large.
CREATE FUNCTION keel_publish_event(p_key text, p_type text, p_data jsonb, p_dedupe text, p_channel text,
                                   p_max_bytes integer)
  RETURNS void
  LANGUAGE plpgsql AS $$
DECLARE
  event_id bigint;
  whole text;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(p_key));
  INSERT INTO conversation_events (conversation_key, type, data, dedupe_key)
  VALUES (p_key, p_type, p_data, p_dedupe)
  ON CONFLICT (conversation_key, dedupe_key) DO NOTHING RETURNING id INTO event_id;
  IF event_id IS NULL THEN RETURN; END IF;
  whole := json_build_object('id', event_id, 'key', p_key, 'type', p_type, 'data', p_data)::text;
  IF octet_length(whole) > p_max_bytes THEN
    whole := json_build_object('id', event_id, 'key', p_key, 'type', p_type, 'data', null)::text;
  END IF;
  PERFORM pg_notify(p_channel, whole);
END $$;

-- Down Migration
DROP FUNCTION keel_publish_event(text, text, jsonb, text, text, integer);
DROP FUNCTION keel_append_transcript(text, text, jsonb);
