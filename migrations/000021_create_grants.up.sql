-- Grants: units a customer bought or was given (top-ups, prepaid and
-- promotional units) that a check draws on when a hard long window of the
-- metric would deny it. A grant is drawn in priority order (0 first),
-- then the soonest to expire; an expired or voided grant is never drawn.
-- Drawing is one transaction that locks the grants it reads (FOR UPDATE),
-- so no unit is ever spent twice, whatever the processes.
--
-- ON DELETE CASCADE: deleting a customer or a metric deletes its grants
-- (the deletion is what the audit log records).
CREATE TABLE grants (
    id           text        COLLATE "C" PRIMARY KEY CHECK (id ~ '^grt_[A-Za-z0-9]{16,64}$'),
    customer_id  text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    metric       text        COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE CASCADE,
    amount       bigint      NOT NULL CHECK (amount BETWEEN 1 AND 9007199254740991),
    remaining    bigint      NOT NULL CHECK (remaining BETWEEN 0 AND amount),
    priority     integer     NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 1000),
    expires_at   timestamptz CHECK (expires_at > created_at),
    reason       text        NOT NULL DEFAULT '' CHECK (char_length(reason) <= 500),
    -- The request id of the creation: a repeat returns the grant made.
    request_id   text,
    created_at   timestamptz NOT NULL,
    voided_at    timestamptz,
    -- When a draw took its last unit.
    exhausted_at timestamptz,
    CONSTRAINT grants_request_once UNIQUE (customer_id, request_id)
);

-- A customer's grants that may still be drawn, in drawing order.
CREATE INDEX grants_live ON grants (customer_id, metric, priority, expires_at)
    WHERE remaining > 0 AND voided_at IS NULL;

-- Every draw, for statements: which grant gave how many units, when.
CREATE TABLE grant_draws (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    grant_id    text        COLLATE "C" NOT NULL REFERENCES grants (id) ON DELETE CASCADE,
    customer_id text        COLLATE "C" NOT NULL,
    metric      text        COLLATE "C" NOT NULL,
    -- Negative when a draw was given back (a check whose request id was
    -- answered before).
    units       bigint      NOT NULL CHECK (units <> 0),
    drawn_at    timestamptz NOT NULL
);

CREATE INDEX grant_draws_customer ON grant_draws (customer_id, drawn_at);

-- Units of a long window that grants paid for (usage's "granted"), per
-- counter of a customer's own.
CREATE TABLE granted_usage (
    customer_id  text        COLLATE "C" NOT NULL,
    metric       text        COLLATE "C" NOT NULL,
    quota_window text        NOT NULL CHECK (quota_window IN ('day', 'week', 'month')),
    window_start timestamptz NOT NULL,
    granted      bigint      NOT NULL CHECK (granted >= 0),
    PRIMARY KEY (customer_id, metric, quota_window, window_start)
);

-- The purge finds past windows' rows by their start, as counters'.
CREATE INDEX granted_usage_window_start ON granted_usage (window_start);

-- Rollover: a hard limit of a day, week or month may turn its window's
-- unused units (at most rollover_max) into a grant that expires when the
-- next window ends.
ALTER TABLE plan_limits ADD COLUMN rollover_max bigint
    CHECK (rollover_max IS NULL OR rollover_max BETWEEN 1 AND 9007199254740991 AND mode = 'hard' AND quota_window IN ('day', 'week', 'month'));
ALTER TABLE overrides ADD COLUMN rollover_max bigint
    CHECK (rollover_max IS NULL OR rollover_max BETWEEN 1 AND 9007199254740991 AND mode = 'hard' AND quota_window IN ('day', 'week', 'month'));

-- grant.exhausted: checks drew a grant's last unit. Such an event concerns
-- no window; it happens once per grant.
ALTER TABLE usage_events
    ADD COLUMN grant_id text COLLATE "C",
    ALTER COLUMN quota_window DROP NOT NULL,
    ALTER COLUMN window_start DROP NOT NULL,
    ALTER COLUMN window_end DROP NOT NULL,
    DROP CONSTRAINT usage_events_type_check,
    ADD CONSTRAINT usage_events_type_check
        CHECK (type IN ('usage.threshold', 'usage.overage_started', 'usage.limit_reached', 'grant.exhausted')),
    ADD CONSTRAINT usage_events_grant_check CHECK (
        CASE WHEN type = 'grant.exhausted'
             THEN grant_id IS NOT NULL AND quota_window IS NULL AND window_start IS NULL AND window_end IS NULL
             ELSE grant_id IS NULL AND quota_window IS NOT NULL AND window_start IS NOT NULL AND window_end IS NOT NULL
        END);
CREATE UNIQUE INDEX usage_events_grant_once ON usage_events (grant_id) WHERE grant_id IS NOT NULL;
-- The purge finds them by age, having no window.
CREATE INDEX usage_events_grant_occurred ON usage_events (occurred_at) WHERE grant_id IS NOT NULL;

ALTER TABLE webhooks
    DROP CONSTRAINT webhooks_events_check,
    ADD CONSTRAINT webhooks_events_check
        CHECK (events <@ ARRAY['usage.threshold', 'usage.overage_started', 'usage.limit_reached', 'grant.exhausted']);
