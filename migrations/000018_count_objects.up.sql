-- Object counts: how many customers and webhooks exist, kept by triggers in
-- the writing transaction, so that the caps on them (--max-customers,
-- --max-webhooks) are checked without counting a table: a creation reads
-- the count its own insert raised, while it holds the count's row lock,
-- so concurrent creations at the cap cannot both pass. The row lock
-- serialises creations and deletions of one kind (not updates) until
-- they commit.
CREATE TABLE object_counts (
    kind text   COLLATE "C" PRIMARY KEY,
    n    bigint NOT NULL CHECK (n >= 0)
);

-- Counts the rows of the table the trigger is on, by its name.
CREATE FUNCTION quotad_count_objects() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE object_counts
    SET n = CASE TG_OP WHEN 'INSERT' THEN n + 1 WHEN 'DELETE' THEN n - 1 ELSE 0 END
    WHERE kind = TG_TABLE_NAME;
    RETURN NULL;
END
$$;

-- Lock the tables while they are counted: a row written meanwhile would
-- be missed by the count.
LOCK TABLE customers, webhooks IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO object_counts (kind, n) VALUES
    ('customers', (SELECT count(*) FROM customers)),
    ('webhooks', (SELECT count(*) FROM webhooks));

CREATE TRIGGER customers_count AFTER INSERT OR DELETE ON customers
    FOR EACH ROW EXECUTE FUNCTION quotad_count_objects();
CREATE TRIGGER webhooks_count AFTER INSERT OR DELETE ON webhooks
    FOR EACH ROW EXECUTE FUNCTION quotad_count_objects();
CREATE TRIGGER customers_truncate AFTER TRUNCATE ON customers
    FOR EACH STATEMENT EXECUTE FUNCTION quotad_count_objects();
CREATE TRIGGER webhooks_truncate AFTER TRUNCATE ON webhooks
    FOR EACH STATEMENT EXECUTE FUNCTION quotad_count_objects();
