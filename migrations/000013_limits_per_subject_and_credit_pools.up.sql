-- Limits per subject and credit pools.
--
-- A plan's limit, or a customer's override, counts for the customer as a
-- whole (per 'customer', what every limit so far does) or for each of its
-- subjects apart (per 'subject': an end user, an IP, an API key). per joins
-- the key of both tables, so that a customer-wide limit and a limit per
-- subject may share a metric and window.
--
-- A metric may be a credit pool: credit_rates lists the metrics that draw
-- on it, each at a rate of credits pool units per `per` units of the
-- metric, in the order the pool's schema names them. The constraints
-- restate the rules of internal/tiers, as in 000001; the rule that spans
-- rows of the table (a pool draws on none) is the store's, checked in the
-- write's transaction.

ALTER TABLE plan_limits
    ADD COLUMN per text COLLATE "C" NOT NULL DEFAULT 'customer' CHECK (per IN ('customer', 'subject')),
    DROP CONSTRAINT plan_limits_pkey,
    ADD PRIMARY KEY (plan_key, metric, quota_window, per);

ALTER TABLE overrides
    ADD COLUMN per text COLLATE "C" NOT NULL DEFAULT 'customer' CHECK (per IN ('customer', 'subject')),
    DROP CONSTRAINT overrides_pkey,
    ADD PRIMARY KEY (customer_id, metric, quota_window, per);

CREATE TABLE credit_rates (
    -- CASCADE: deleting a pool deletes its schema.
    pool     text     COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE CASCADE,
    -- RESTRICT: a metric cannot be deleted while a pool's schema names it.
    metric   text     COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE RESTRICT,
    credits  bigint   NOT NULL CHECK (credits BETWEEN 1 AND 9007199254740991),
    per      bigint   NOT NULL DEFAULT 1 CHECK (per BETWEEN 1 AND 9007199254740991),
    position smallint NOT NULL CHECK (position >= 0),
    PRIMARY KEY (pool, metric),
    CONSTRAINT credit_rates_position UNIQUE (pool, position),
    -- A metric draws on at most one pool.
    CONSTRAINT credit_rates_one_pool UNIQUE (metric),
    -- A pool cannot draw on itself.
    CONSTRAINT credit_rates_not_self CHECK (pool <> metric)
);
