-- Up Migration

-- Named destinations a person configures; the model names one of them, never a URL or a Slack target.
ALTER TABLE agents ADD COLUMN destinations jsonb NOT NULL DEFAULT '{}'::jsonb;

-- A job delivers to a Delivery (given by a person through the API) or to one of its agent's destinations by name,
-- resolved when the result is delivered; and it records who chose the target.
ALTER TABLE jobs ALTER COLUMN delivery DROP NOT NULL;
ALTER TABLE jobs ADD COLUMN destination text;
ALTER TABLE jobs ADD COLUMN delivery_chosen_by text;
-- Before this, whoever created the job chose its target: jobs the model made with a raw URL stay marked as the
-- model's choice, and their results are refused at delivery.
UPDATE jobs SET delivery_chosen_by = created_by;
ALTER TABLE jobs ALTER COLUMN delivery_chosen_by SET NOT NULL;
ALTER TABLE jobs ADD CONSTRAINT jobs_delivery_chosen_by CHECK (delivery_chosen_by IN ('agent', 'user'));
ALTER TABLE jobs ADD CONSTRAINT jobs_one_target CHECK ((delivery IS NULL) <> (destination IS NULL));

-- Down Migration
ALTER TABLE jobs DROP CONSTRAINT jobs_one_target;
UPDATE jobs SET delivery = '{"channel":"none"}'::jsonb WHERE delivery IS NULL;
ALTER TABLE jobs DROP COLUMN delivery_chosen_by;
ALTER TABLE jobs DROP COLUMN destination;
ALTER TABLE jobs ALTER COLUMN delivery SET NOT NULL;
ALTER TABLE agents DROP COLUMN destinations;
