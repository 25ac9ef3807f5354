-- Up Migration

-- The console's lists read a turn's deliveries and a delegate's admissions per row.
CREATE INDEX deliveries_by_turn ON deliveries (turn_id);
CREATE INDEX delegate_admissions_by_delegate ON delegate_admissions (delegate_id);

-- Down Migration
DROP INDEX delegate_admissions_by_delegate;
DROP INDEX deliveries_by_turn;
