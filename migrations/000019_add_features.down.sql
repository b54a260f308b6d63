DROP TABLE IF EXISTS feature_overrides;
ALTER TABLE plans DROP COLUMN IF EXISTS features;
