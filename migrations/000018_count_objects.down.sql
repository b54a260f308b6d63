DROP TRIGGER IF EXISTS webhooks_truncate ON webhooks;
DROP TRIGGER IF EXISTS customers_truncate ON customers;
DROP TRIGGER IF EXISTS webhooks_count ON webhooks;
DROP TRIGGER IF EXISTS customers_count ON customers;
DROP FUNCTION IF EXISTS quotad_count_objects();
DROP TABLE IF EXISTS object_counts;
