-- Plan versions: every change of a plan's price, limits or features makes a
-- new version, kept here as it was (a snapshot; the plan's current terms
-- stay in plans and plan_limits, equal to its latest version).
--
-- Customers are grouped by version: customers.plan_version names the
-- version a customer joined the plan at (or was last migrated to), and that
-- version's customers_on the version its customers are on now. A change
-- without grandfathering moves the group of the latest version to the new
-- one; a migration moves groups to a chosen version; neither rewrites a
-- customer. A version's own limits never change, so a customer is on
-- plan_versions[customers.plan_version].customers_on, whatever happened.

ALTER TABLE plans ADD COLUMN latest_version bigint NOT NULL DEFAULT 1 CHECK (latest_version >= 1);

CREATE TABLE plan_versions (
    plan_key           text        COLLATE "C" NOT NULL REFERENCES plans (key) ON DELETE CASCADE,
    version            bigint      NOT NULL CHECK (version >= 1),
    price_amount_cents bigint      NOT NULL CHECK (price_amount_cents BETWEEN 0 AND 9007199254740991),
    price_currency     text        NOT NULL CHECK (price_currency ~ '^[A-Z]{3}$'),
    price_interval     text        NOT NULL CHECK (price_interval IN ('day', 'week', 'month', 'year')),
    -- The limits as the store reads plan_limits: an array of objects in
    -- the plan's order (metric, window, limit, mode, overage_percent,
    -- overage_price_micros, ceiling, algorithm, burst, per, rollover_max).
    -- No foreign key to metrics: a metric only old versions limit may go.
    limits             jsonb       NOT NULL CHECK (jsonb_typeof(limits) = 'array'),
    features           jsonb       NOT NULL CHECK (jsonb_typeof(features) = 'object'),
    customers_on       bigint      NOT NULL,
    created_at         timestamptz NOT NULL,
    PRIMARY KEY (plan_key, version),
    CONSTRAINT plan_versions_customers_on FOREIGN KEY (plan_key, customers_on)
        REFERENCES plan_versions (plan_key, version)
);

-- Every plan as it is now is its version 1, and all its customers are on it.
INSERT INTO plan_versions (plan_key, version, price_amount_cents, price_currency, price_interval, limits, features,
                           customers_on, created_at)
SELECT p.key, 1, p.price_amount_cents, p.price_currency, p.price_interval,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                     'metric', l.metric, 'window', l.quota_window, 'limit', l.limit_value,
                     'mode', l.mode, 'overage_percent', l.overage_percent,
                     'overage_price_micros', l.overage_price_micros, 'ceiling', l.ceiling,
                     'algorithm', l.algorithm, 'burst', l.burst, 'per', l.per,
                     'rollover_max', l.rollover_max)
                     ORDER BY l.position)
                 FROM plan_limits l WHERE l.plan_key = p.key), '[]'),
       p.features, 1, p.updated_at
FROM plans p;

ALTER TABLE customers ADD COLUMN plan_version bigint NOT NULL DEFAULT 1;
-- Whatever changes a customer's plan sets the version it joins at (the
-- plan's latest_version) in the same statement.
ALTER TABLE customers ADD CONSTRAINT customers_plan_version FOREIGN KEY (plan_key, plan_version)
    REFERENCES plan_versions (plan_key, version);
