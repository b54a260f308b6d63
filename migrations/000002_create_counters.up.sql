-- Long-window counters, global usage for elastic limits, idempotency keys
-- and daily usage history.

-- One row per customer, metric, calendar window and window start. Changed
-- only by conditional upserts (used + cost <= threshold), never by
-- read-modify-write. Rows go with their customer.
CREATE TABLE usage_counters (
    customer_id  text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    metric       text        COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE CASCADE,
    quota_window text        NOT NULL CHECK (quota_window IN ('hour', 'day', 'week', 'month')),
    window_start timestamptz NOT NULL,
    used         bigint      NOT NULL CHECK (used BETWEEN 0 AND 9007199254740991),
    PRIMARY KEY (customer_id, metric, quota_window, window_start)
);

CREATE INDEX usage_counters_window_start ON usage_counters (window_start);

-- A metric's global usage per calendar window, for elastic limits. It is
-- spread over shards so that no single row is locked by every check; the
-- usage is the sum over shards.
CREATE TABLE metric_usage (
    metric       text        COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE CASCADE,
    quota_window text        NOT NULL CHECK (quota_window IN ('hour', 'day', 'week', 'month')),
    window_start timestamptz NOT NULL,
    shard        smallint    NOT NULL CHECK (shard BETWEEN 0 AND 63),
    used         bigint      NOT NULL,
    PRIMARY KEY (metric, quota_window, window_start, shard)
);

-- Answers of idempotent checks and seen refund ids, kept 24 hours.
CREATE TABLE request_ids (
    customer_id text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    kind        text        NOT NULL CHECK (kind IN ('check', 'refund')),
    request_id  text        NOT NULL CHECK (length(request_id) BETWEEN 1 AND 200),
    metric      text        NOT NULL,
    cost        bigint      NOT NULL CHECK (cost > 0),
    answer      jsonb,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (customer_id, kind, request_id)
);

CREATE INDEX request_ids_created_at ON request_ids (created_at);

-- Daily totals for billing. No foreign keys: history outlives customers
-- and metrics.
CREATE TABLE usage_history (
    customer_id text COLLATE "C" NOT NULL,
    metric      text COLLATE "C" NOT NULL,
    day         date   NOT NULL,
    used        bigint NOT NULL DEFAULT 0 CHECK (used >= 0),
    overage     bigint NOT NULL DEFAULT 0 CHECK (overage >= 0),
    denied      bigint NOT NULL DEFAULT 0 CHECK (denied >= 0),
    PRIMARY KEY (customer_id, day, metric)
);
