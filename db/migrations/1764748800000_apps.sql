-- Up Migration

-- An app of an agent: its tables (name and columns) and their records, app-scoped.
CREATE TABLE apps (
  agent_id   text NOT NULL REFERENCES agents(id),
  app_id     text NOT NULL,
  name       text NOT NULL,
  tables     jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, app_id)
);

CREATE TABLE app_records (
  agent_id   text NOT NULL,
  app_id     text NOT NULL,
  table_name text NOT NULL,
  record_id  text NOT NULL,
  data       jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, app_id, table_name, record_id),
  FOREIGN KEY (agent_id, app_id) REFERENCES apps(agent_id, app_id) ON DELETE CASCADE
);

-- Down Migration
DROP TABLE app_records;
DROP TABLE apps;
