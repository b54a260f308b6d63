-- Webhooks and the outbox that delivers usage events to them.

-- A receiver of usage events. The secret signs deliveries (Standard
-- Webhooks: "whsec_" and the base64 of the key); the API shows it once, at
-- creation, and a hint of it afterwards.
CREATE TABLE webhooks (
    id         text        COLLATE "C" PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    url        text        NOT NULL CHECK (url ~ '^https?://'),
    events     text[]      NOT NULL CHECK (events <@ ARRAY['usage.threshold', 'usage.overage_started', 'usage.limit_reached']),
    thresholds integer[]   NOT NULL CHECK (1 <= ALL (thresholds) AND 1000 >= ALL (thresholds)),
    secret     text        NOT NULL CHECK (secret ~ '^whsec_'),
    version    bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- What happened to a long window's usage: a threshold percent of its limit
-- crossed, overage started, the first denial. Each happens once per
-- customer, metric, window start, type and threshold (0 for the types that
-- have none), whichever process saw it first. No foreign keys: events
-- outlive customers and metrics, as history does.
CREATE TABLE usage_events (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type         text        NOT NULL CHECK (type IN ('usage.threshold', 'usage.overage_started', 'usage.limit_reached')),
    customer_id  text        COLLATE "C" NOT NULL,
    metric       text        COLLATE "C" NOT NULL,
    quota_window text        NOT NULL CHECK (quota_window IN ('hour', 'day', 'week', 'month')),
    window_start timestamptz NOT NULL,
    window_end   timestamptz NOT NULL CHECK (window_end > window_start),
    threshold    integer     NOT NULL CHECK (threshold BETWEEN 0 AND 1000),
    limit_value  bigint      NOT NULL CHECK (limit_value BETWEEN 0 AND 9007199254740991),
    used         bigint      NOT NULL CHECK (used BETWEEN 0 AND 9007199254740991),
    occurred_at  timestamptz NOT NULL,
    CONSTRAINT usage_events_once UNIQUE (customer_id, metric, quota_window, window_start, type, threshold)
);

-- The outbox: one row per webhook and event, written in the transaction
-- that records the event, claimed by delivery workers with
-- FOR UPDATE SKIP LOCKED.
CREATE TABLE webhook_deliveries (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id      text        COLLATE "C" NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id        bigint      NOT NULL REFERENCES usage_events (id) ON DELETE CASCADE,
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL,
    last_attempt_at timestamptz,
    last_status     integer,
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    delivered_at    timestamptz,
    CONSTRAINT webhook_deliveries_once UNIQUE (webhook_id, event_id)
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id DESC);
