-- Up Migration

-- What an agent spent per UTC day and month, kept as calls settle: a reservation reads its daily and monthly budget's
-- spending here in one row, instead of summing every call of the period under the agent's spend lock.
CREATE TABLE spend_totals (
  agent_id  text NOT NULL,
  period    text NOT NULL, -- 'day:YYYY-MM-DD' or 'month:YYYY-MM', of the calls' created_at
  spent_usd numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (agent_id, period)
);
INSERT INTO spend_totals (agent_id, period, spent_usd)
  SELECT agent_id, 'day:' || to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), sum(cost_usd)
    FROM model_spend GROUP BY 1, 2
  UNION ALL
  SELECT agent_id, 'month:' || to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM'), sum(cost_usd)
    FROM model_spend GROUP BY 1, 2;

-- The holds of live calls: few at any time, found without reading the settled ones.
CREATE INDEX model_spend_holding ON model_spend (agent_id) WHERE held_usd > 0;

-- Down Migration
DROP INDEX model_spend_holding;
DROP TABLE spend_totals;
