-- Usage to Stripe Billing meters. stripe_usage_pending sums, per customer
-- and metric, the units admitted since the last cut: AddHistory adds to it
-- in the same transaction as it adds to usage_history, so that Stripe sees
-- exactly what history does. Every interval a cut moves each positive sum
-- into stripe_meter_events, the outbox: one meter event per customer, metric
-- and minute, whose identifier never changes, kept until Stripe
-- acknowledges it.
CREATE TABLE stripe_usage_pending (
    customer_id text   NOT NULL,
    metric      text   NOT NULL,
    value       bigint NOT NULL,
    PRIMARY KEY (customer_id, metric)
);

CREATE TABLE stripe_meter_events (
    customer_id     text        NOT NULL,
    metric          text        NOT NULL,
    minute          timestamptz NOT NULL,
    stripe_customer text        NOT NULL,
    value           bigint      NOT NULL CHECK (value > 0),
    identifier      text        NOT NULL UNIQUE,
    -- pending, or failed: given up after the retry window (kept, for an
    -- operator to see; delivered events are deleted).
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_status     integer,
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (customer_id, metric, minute)
);

CREATE INDEX stripe_meter_events_due ON stripe_meter_events (next_attempt_at) WHERE status = 'pending';
