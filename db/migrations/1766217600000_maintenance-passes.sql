-- Up Migration
-- One-time passes over stored data that need what a migration does not have (a key from the environment): each is
-- recorded here once it has run, so that a start after it does not scan again.
CREATE TABLE maintenance_passes (
  name        text PRIMARY KEY,
  finished_at timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE maintenance_passes;
