ALTER TABLE customers DROP CONSTRAINT IF EXISTS customers_plan_version;
ALTER TABLE customers DROP COLUMN IF EXISTS plan_version;
DROP TABLE IF EXISTS plan_versions;
ALTER TABLE plans DROP COLUMN IF EXISTS latest_version;
