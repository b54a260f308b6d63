-- A customer's billing terms over time, for statements: which plan it was
-- on from when to when, with a snapshot of what that plan billed then. The
-- catalog write that changes them (a customer created, moved to another
-- plan, given another anchor day or deleted; a plan's billed terms changed)
-- closes the open row and opens the next in its own transaction.
-- customer_id has no foreign key on purpose: a deleted customer's past
-- periods are still billed, as usage history outlives it.
CREATE TABLE plan_assignments (
    id                 bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer_id        text        COLLATE "C" NOT NULL,
    valid_from         timestamptz NOT NULL,
    -- null: still in effect.
    valid_to           timestamptz,
    plan_key           text        COLLATE "C" NOT NULL,
    plan_name          text        NOT NULL,
    price_amount_cents bigint      NOT NULL CHECK (price_amount_cents BETWEEN 0 AND 9007199254740991),
    price_currency     text        NOT NULL CHECK (price_currency ~ '^[A-Z]{3}$'),
    price_interval     text        NOT NULL CHECK (price_interval IN ('day', 'week', 'month', 'year')),
    -- {metric: micros}: the plan's overage price per metric (of the longest
    -- window whose soft limit carries one).
    overage_prices     jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(overage_prices) = 'object'),
    billing_anchor_day smallint    CHECK (billing_anchor_day BETWEEN 1 AND 28),
    CONSTRAINT plan_assignments_ordered CHECK (valid_to IS NULL OR valid_to >= valid_from)
);

-- One open row per customer.
CREATE UNIQUE INDEX plan_assignments_open ON plan_assignments (customer_id) WHERE valid_to IS NULL;
CREATE INDEX plan_assignments_customer ON plan_assignments (customer_id, valid_from);
CREATE INDEX plan_assignments_open_plan ON plan_assignments (plan_key) WHERE valid_to IS NULL;

-- Every existing customer has been on its plan since it was created, as
-- far as anything recorded says.
INSERT INTO plan_assignments (customer_id, valid_from, plan_key, plan_name, price_amount_cents, price_currency,
                              price_interval, overage_prices, billing_anchor_day)
SELECT c.id, date_trunc('second', c.created_at), p.key, p.name, p.price_amount_cents, p.price_currency,
       p.price_interval,
       coalesce((SELECT jsonb_object_agg(o.metric, o.overage_price_micros)
                 FROM (SELECT DISTINCT ON (l.metric) l.metric, l.overage_price_micros
                       FROM plan_limits l
                       WHERE l.plan_key = p.key AND l.overage_price_micros IS NOT NULL
                       ORDER BY l.metric, window_rank(l.quota_window) DESC) o), '{}'),
       c.billing_anchor_day
FROM customers c JOIN plans p ON p.key = c.plan_key;
