-- The catalog: metrics, plans with their limits, customers and their overrides.
-- Constraints here restate the rules of internal/tiers so that no client, tool or
-- hand-written statement can leave a state the service cannot serve.

CREATE TABLE metrics (
    key         text        COLLATE "C" PRIMARY KEY CHECK (key ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    description text        NOT NULL DEFAULT '',
    version     bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE metric_capacities (
    metric       text   COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE CASCADE,
    quota_window text   NOT NULL CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month')),
    capacity     bigint NOT NULL CHECK (capacity BETWEEN 0 AND 9007199254740991),
    PRIMARY KEY (metric, quota_window)
);

CREATE TABLE plans (
    key                text        COLLATE "C" PRIMARY KEY CHECK (key ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    name               text        NOT NULL,
    description        text        NOT NULL DEFAULT '',
    price_amount_cents bigint      NOT NULL DEFAULT 0 CHECK (price_amount_cents BETWEEN 0 AND 9007199254740991),
    price_currency     text        NOT NULL DEFAULT 'USD' CHECK (price_currency ~ '^[A-Z]{3}$'),
    price_interval     text        NOT NULL DEFAULT 'month' CHECK (price_interval IN ('day', 'week', 'month', 'year')),
    version            bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);

CREATE TABLE plan_limits (
    plan_key             text     COLLATE "C" NOT NULL REFERENCES plans (key) ON DELETE CASCADE,
    -- RESTRICT: a metric cannot be deleted while a plan limits it.
    metric               text     COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE RESTRICT,
    quota_window         text     NOT NULL CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month')),
    position             smallint NOT NULL CHECK (position >= 0),
    limit_value          bigint   NOT NULL CHECK (limit_value BETWEEN 0 AND 9007199254740991),
    mode                 text     NOT NULL CHECK (mode IN ('hard', 'soft', 'elastic')),
    overage_percent      integer  NOT NULL DEFAULT 0 CHECK (overage_percent BETWEEN 0 AND 1000),
    overage_price_micros bigint   CHECK (overage_price_micros BETWEEN 0 AND 9007199254740991),
    ceiling              bigint   CHECK (ceiling <= 9007199254740991),
    PRIMARY KEY (plan_key, metric, quota_window),
    CONSTRAINT plan_limits_overage_soft_only CHECK (mode = 'soft' OR (overage_percent = 0 AND overage_price_micros IS NULL)),
    CONSTRAINT plan_limits_ceiling_elastic_only CHECK (ceiling IS NULL OR (mode = 'elastic' AND ceiling >= limit_value))
);

CREATE TABLE customers (
    id                  text        COLLATE "C" PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$'),
    -- RESTRICT: a plan cannot be deleted while customers are on it.
    plan_key            text        COLLATE "C" NOT NULL REFERENCES plans (key) ON DELETE RESTRICT,
    name                text        NOT NULL DEFAULT '',
    billing_anchor_day  smallint    CHECK (billing_anchor_day BETWEEN 1 AND 28),
    -- A changed anchor applies from the next period: the period in progress at
    -- the change keeps these exact bounds.
    anchor_pinned_start timestamptz,
    anchor_pinned_end   timestamptz,
    metadata            jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    version             bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    CONSTRAINT customers_anchor_pin_complete CHECK (
        (anchor_pinned_start IS NULL AND anchor_pinned_end IS NULL)
        OR anchor_pinned_start < anchor_pinned_end)
);

CREATE INDEX customers_plan_key_id ON customers (plan_key, id);

CREATE TABLE overrides (
    customer_id          text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    -- RESTRICT: a metric cannot be deleted while an override (expired or not) uses it.
    metric               text        COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE RESTRICT,
    quota_window         text        NOT NULL CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month')),
    limit_value          bigint      NOT NULL CHECK (limit_value BETWEEN 0 AND 9007199254740991),
    mode                 text        NOT NULL CHECK (mode IN ('hard', 'soft', 'elastic')),
    overage_percent      integer     NOT NULL DEFAULT 0 CHECK (overage_percent BETWEEN 0 AND 1000),
    overage_price_micros bigint      CHECK (overage_price_micros BETWEEN 0 AND 9007199254740991),
    ceiling              bigint      CHECK (ceiling <= 9007199254740991),
    expires_at           timestamptz,
    reason               text        NOT NULL DEFAULT '',
    version              bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    PRIMARY KEY (customer_id, metric, quota_window),
    CONSTRAINT overrides_overage_soft_only CHECK (mode = 'soft' OR (overage_percent = 0 AND overage_price_micros IS NULL)),
    CONSTRAINT overrides_ceiling_elastic_only CHECK (ceiling IS NULL OR (mode = 'elastic' AND ceiling >= limit_value))
);

CREATE INDEX overrides_metric ON overrides (metric);

-- Every committed admin write, in the transaction of the write itself.
-- customer_id has no foreign key on purpose: the trail outlives the customer.
CREATE TABLE audit_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor       text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('create', 'update', 'delete', 'reset')),
    resource    text        NOT NULL,
    customer_id text        COLLATE "C",
    before      jsonb,
    after       jsonb
);

CREATE INDEX audit_events_customer_id ON audit_events (customer_id, id DESC) WHERE customer_id IS NOT NULL;

-- window_rank orders windows from shortest to longest.
CREATE FUNCTION window_rank(w text) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN array_position(ARRAY['second', 'minute', 'hour', 'day', 'week', 'month'], w)::smallint;
