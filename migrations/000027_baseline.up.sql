-- quotad's schema, whole: the baseline. It states every table, index, view,
-- trigger and function of schema 27 as it stands, in the order a reader
-- needs them: the catalog, then what counts usage, then the records kept of
-- it; the indexes; the functions (with their roles in COMMENT ON FUNCTION,
-- which psql's \df+ shows); and what stands on the functions (the view of
-- live leases, the triggers that count objects).
--
-- It replaces migrations 1 to 27, which built the same schema step by step
-- (git history keeps them, and internal/store/testdata/schema.golden shows
-- the schema they and this file make, compared by TestSchemaDump). It is
-- numbered 27 so that a database those migrations brought to 27 has
-- nothing to apply, and a fresh one comes straight to 27. A database at an
-- older version is first migrated to 27 by a quotad built before the
-- baseline (see "Upgrading and rolling back" in docs/operations.md).
--
-- A table's columns stand in the order a database migrated step by step
-- has them (a column added by a later migration last), so that both are
-- one schema, column for column. Constraints restate the rules of
-- internal/tiers so that no client, tool or hand-written statement can
-- leave a state the service cannot serve; a later change to the schema is
-- a migration after this one.

-- The catalog ----------------------------------------------------------------

CREATE TABLE metrics (
    key         text        COLLATE "C" PRIMARY KEY CHECK (key ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    description text        NOT NULL DEFAULT '',
    version     bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- A metric's capacity per window, for elastic limits. A total has none:
-- spare capacity needs a period.
CREATE TABLE metric_capacities (
    metric       text   COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE CASCADE,
    quota_window text   NOT NULL CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month')),
    capacity     bigint NOT NULL CHECK (capacity BETWEEN 0 AND 9007199254740991),
    PRIMARY KEY (metric, quota_window)
);

-- A metric may be a credit pool: credit_rates lists the metrics that draw
-- on it, each at a rate of credits pool units per `per` units of the
-- metric, in the order the pool's schema names them. The rule that spans
-- rows of the table (a pool draws on none) is the store's, checked in the
-- write's transaction.
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

-- A plan's current terms; plan_versions keeps each version of them.
CREATE TABLE plans (
    key                text        COLLATE "C" PRIMARY KEY CHECK (key ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    name               text        NOT NULL,
    description        text        NOT NULL DEFAULT '',
    price_amount_cents bigint      NOT NULL DEFAULT 0 CHECK (price_amount_cents BETWEEN 0 AND 9007199254740991),
    price_currency     text        NOT NULL DEFAULT 'USD' CHECK (price_currency ~ '^[A-Z]{3}$'),
    price_interval     text        NOT NULL DEFAULT 'month' CHECK (price_interval IN ('day', 'week', 'month', 'year')),
    version            bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    -- What the plan grants besides metered limits (a switch, a number, a
    -- level): a JSON boolean, integer or string per feature, which quotad
    -- validates (see tiers.ParseFeatureValue); the check keeps the shape.
    features           jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(features) = 'object'),
    latest_version     bigint      NOT NULL DEFAULT 1 CHECK (latest_version >= 1),
    -- A public plan may be offered to a customer whose check a hard limit
    -- denied (the check answer's "upgrade"). An attribute of the plan, not
    -- of its versions: a change of it alone makes no version.
    public             boolean     NOT NULL DEFAULT false
);

-- A plan's limits. per: the limit counts for the customer as a whole or
-- for each of its subjects apart (an end user, an IP, an API key); it
-- joins the key, so that a customer-wide limit and a limit per subject may
-- share a metric and window.
CREATE TABLE plan_limits (
    plan_key             text     COLLATE "C" NOT NULL REFERENCES plans (key) ON DELETE CASCADE,
    -- RESTRICT: a metric cannot be deleted while a plan limits it.
    metric               text     COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE RESTRICT,
    quota_window         text     NOT NULL
        CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month', 'total')),
    position             smallint NOT NULL CHECK (position >= 0),
    limit_value          bigint   NOT NULL CHECK (limit_value BETWEEN 0 AND 9007199254740991),
    mode                 text     NOT NULL CHECK (mode IN ('hard', 'soft', 'elastic')),
    overage_percent      integer  NOT NULL DEFAULT 0 CHECK (overage_percent BETWEEN 0 AND 1000),
    overage_price_micros bigint   CHECK (overage_price_micros BETWEEN 0 AND 9007199254740991),
    ceiling              bigint   CHECK (ceiling <= 9007199254740991),
    -- How a short window's limit counts (null: sliding_window) and, for a
    -- token bucket, the bucket's size (null: the limit).
    algorithm            text
        CHECK (algorithm IN ('sliding_window', 'fixed_window', 'sliding_log', 'token_bucket')),
    burst                bigint   CHECK (burst BETWEEN 1 AND 9007199254740991),
    per                  text     COLLATE "C" NOT NULL DEFAULT 'customer' CHECK (per IN ('customer', 'subject')),
    -- Rollover: a hard limit of a day, week or month may turn its window's
    -- unused units (at most rollover_max) into a grant that expires when
    -- the next window ends.
    rollover_max         bigint
        CHECK (rollover_max IS NULL OR rollover_max BETWEEN 1 AND 9007199254740991 AND mode = 'hard' AND quota_window IN ('day', 'week', 'month')),
    PRIMARY KEY (plan_key, metric, quota_window, per),
    CONSTRAINT plan_limits_overage_soft_only CHECK (mode = 'soft' OR (overage_percent = 0 AND overage_price_micros IS NULL)),
    CONSTRAINT plan_limits_ceiling_elastic_only CHECK (ceiling IS NULL OR (mode = 'elastic' AND ceiling >= limit_value)),
    CONSTRAINT plan_limits_algorithm_short_only
        CHECK (algorithm IS NULL OR quota_window IN ('second', 'minute')),
    CONSTRAINT plan_limits_burst_token_bucket_only
        CHECK (burst IS NULL OR algorithm IS NOT DISTINCT FROM 'token_bucket'),
    CONSTRAINT plan_limits_sliding_log_bounded
        CHECK (algorithm IS DISTINCT FROM 'sliding_log' OR limit_value <= 10000),
    -- A total (a gauge: seats, projects, a lifetime allowance) is hard
    -- only: an overage or spare capacity needs a period.
    CONSTRAINT plan_limits_total_hard_only CHECK (quota_window <> 'total' OR mode = 'hard')
);

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

-- A customer may be suspended (its checks refused, with a reason), may have
-- a plan change scheduled for an instant, and may be on a trial of another
-- plan until an instant. quotad applies a scheduled change or a trial's
-- end at its instant, once: the process that does locks the customer's row
-- and clears the columns in the same transaction (see
-- store.ApplyPlanChanges).
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
    status              text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    status_reason       text        NOT NULL DEFAULT '' CHECK (char_length(status_reason) <= 500),
    -- RESTRICT, as plan_key: a plan a customer will be on cannot be deleted.
    scheduled_plan_key  text        COLLATE "C" REFERENCES plans (key) ON DELETE RESTRICT,
    scheduled_at        timestamptz,
    trial_plan_key      text        COLLATE "C" REFERENCES plans (key) ON DELETE RESTRICT,
    trial_ends_at       timestamptz,
    -- Whatever changes a customer's plan sets the version it joins at (the
    -- plan's latest_version) in the same statement.
    plan_version        bigint      NOT NULL DEFAULT 1,
    -- An IANA name: the customer's day, week and month windows and its
    -- billing periods start at local midnight there. quotad checks the
    -- name before writing it.
    time_zone           text        NOT NULL DEFAULT 'UTC' CHECK (time_zone <> ''),
    -- A changed time zone applies from the next window: the day and week
    -- windows in progress at the change are pinned with their exact bounds
    -- (the month is pinned in anchor_pinned_start/_end, as for a changed
    -- anchor day).
    day_pinned_start    timestamptz,
    day_pinned_end      timestamptz,
    week_pinned_start   timestamptz,
    week_pinned_end     timestamptz,
    CONSTRAINT customers_anchor_pin_complete CHECK (
        (anchor_pinned_start IS NULL AND anchor_pinned_end IS NULL)
        OR anchor_pinned_start < anchor_pinned_end),
    CONSTRAINT customers_scheduled_complete CHECK ((scheduled_plan_key IS NULL) = (scheduled_at IS NULL)),
    CONSTRAINT customers_trial_complete CHECK ((trial_plan_key IS NULL) = (trial_ends_at IS NULL)),
    CONSTRAINT customers_plan_version FOREIGN KEY (plan_key, plan_version)
        REFERENCES plan_versions (plan_key, version),
    CONSTRAINT customers_day_pin_complete CHECK (
        (day_pinned_start IS NULL AND day_pinned_end IS NULL) OR day_pinned_start < day_pinned_end),
    CONSTRAINT customers_week_pin_complete CHECK (
        (week_pinned_start IS NULL AND week_pinned_end IS NULL) OR week_pinned_start < week_pinned_end)
);

-- A customer's overrides of its plan's limits, as plan_limits.
CREATE TABLE overrides (
    customer_id          text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    -- RESTRICT: a metric cannot be deleted while an override (expired or not) uses it.
    metric               text        COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE RESTRICT,
    quota_window         text        NOT NULL
        CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month', 'total')),
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
    algorithm            text
        CHECK (algorithm IN ('sliding_window', 'fixed_window', 'sliding_log', 'token_bucket')),
    burst                bigint      CHECK (burst BETWEEN 1 AND 9007199254740991),
    per                  text        COLLATE "C" NOT NULL DEFAULT 'customer' CHECK (per IN ('customer', 'subject')),
    rollover_max         bigint
        CHECK (rollover_max IS NULL OR rollover_max BETWEEN 1 AND 9007199254740991 AND mode = 'hard' AND quota_window IN ('day', 'week', 'month')),
    PRIMARY KEY (customer_id, metric, quota_window, per),
    CONSTRAINT overrides_overage_soft_only CHECK (mode = 'soft' OR (overage_percent = 0 AND overage_price_micros IS NULL)),
    CONSTRAINT overrides_ceiling_elastic_only CHECK (ceiling IS NULL OR (mode = 'elastic' AND ceiling >= limit_value)),
    CONSTRAINT overrides_algorithm_short_only
        CHECK (algorithm IS NULL OR quota_window IN ('second', 'minute')),
    CONSTRAINT overrides_burst_token_bucket_only
        CHECK (burst IS NULL OR algorithm IS NOT DISTINCT FROM 'token_bucket'),
    CONSTRAINT overrides_sliding_log_bounded
        CHECK (algorithm IS DISTINCT FROM 'sliding_log' OR limit_value <= 10000),
    CONSTRAINT overrides_total_hard_only CHECK (quota_window <> 'total' OR mode = 'hard')
);

-- A customer's overrides of its plan's features (see plans.features).
CREATE TABLE feature_overrides (
    customer_id text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    feature     text        COLLATE "C" NOT NULL CHECK (feature ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    value       jsonb       NOT NULL CHECK (jsonb_typeof(value) IN ('boolean', 'number', 'string')),
    expires_at  timestamptz,
    reason      text        NOT NULL DEFAULT '',
    version     bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (customer_id, feature)
);

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
    -- The time zone the periods were counted in, kept as the anchor day is.
    time_zone          text        NOT NULL DEFAULT 'UTC' CHECK (time_zone <> ''),
    CONSTRAINT plan_assignments_ordered CHECK (valid_to IS NULL OR valid_to >= valid_from)
);

-- API keys quotad issues to customers. quotad stores the SHA-256 of each
-- key, never the key: the API shows the key once, in the answer to its
-- creation. A revoked key keeps its row (revoked_at set) for the record; it
-- is no longer found, listed or accepted.
--
-- ON DELETE CASCADE: deleting a customer deletes its keys (they could only
-- name a customer that no longer exists); the customer's deletion is what
-- the audit log records.
CREATE TABLE api_keys (
    id           text        COLLATE "C" PRIMARY KEY CHECK (id ~ '^key_[A-Za-z0-9]{16,64}$'),
    customer_id  text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    name         text        NOT NULL DEFAULT '' CHECK (char_length(name) <= 100),
    prefix       text        NOT NULL CHECK (char_length(prefix) = 8),
    digest       bytea       NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz CHECK (expires_at > created_at),
    revoked_at   timestamptz,
    -- Kept to the minute, written in batches off the check path.
    last_used_at timestamptz
);

-- Counting -------------------------------------------------------------------

-- A counter: one row per customer, metric, subject, calendar window and
-- window start. Subject '' is the customer's own counter; a limit per
-- subject counts each subject apart, beside the customer-wide limits of the
-- same metric. subject comes right after metric in the key, so that what
-- finds counters by customer and metric (a reset of a metric, which resets
-- every subject's counter with the customer's) reads a prefix of it.
-- Changed only by conditional upserts (used + cost <= threshold), never by
-- read-modify-write; used counts every unit granted, admitted or held
-- unused in leases. Rows go with their customer. A total (the window that
-- never ends) has one counter, from the Unix epoch, never purged.
CREATE TABLE usage_counters (
    customer_id  text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    metric       text        COLLATE "C" NOT NULL REFERENCES metrics (key) ON DELETE CASCADE,
    quota_window text        NOT NULL CHECK (quota_window IN ('hour', 'day', 'week', 'month', 'total')),
    window_start timestamptz NOT NULL,
    used         bigint      NOT NULL CHECK (used BETWEEN 0 AND 9007199254740991),
    -- A process was refused a grant of this counter while no other live
    -- process held units of it unused, and refuses checks from memory
    -- since. The first call that gives units back (a settlement, a report
    -- of more unused units, a refund) tells every process, and clears it.
    watched      boolean     NOT NULL DEFAULT false,
    subject      text        COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (customer_id, metric, subject, quota_window, window_start),
    CONSTRAINT usage_counters_total_from_epoch
        CHECK (quota_window <> 'total' OR window_start = '1970-01-01T00:00:00Z')
);

-- Leases: blocks of a counter's units a quotad process (its holder)
-- reserves with one conditional update, then admits checks from in memory
-- (see "Leases" among the functions below).
CREATE TABLE counter_leases (
    customer_id  text        COLLATE "C" NOT NULL,
    metric       text        COLLATE "C" NOT NULL,
    quota_window text        NOT NULL,
    window_start timestamptz NOT NULL,
    -- The holding process, named by the key (an int4) of the advisory lock
    -- it holds on a session of its own while it runs (see
    -- quotad_holder_sessions).
    holder       bigint      NOT NULL,
    -- Units the holder held unused when it last reported: never fewer than
    -- it holds now, as in between it only admits from them.
    unused       bigint      NOT NULL CHECK (unused >= 0),
    -- The number of the last call applied to the lease.
    seq          bigint      NOT NULL DEFAULT 0,
    -- What the call numbered seq granted, if it was a grant.
    granted      bigint      NOT NULL DEFAULT 0 CHECK (granted >= 0),
    -- true: seq is a call that quotad_resolve fenced off, not one applied.
    fenced       boolean     NOT NULL DEFAULT false,
    -- false: the holder holds no lease here (it settled, or its call was
    -- fenced off before it made one); the row only keeps seq.
    held         boolean     NOT NULL DEFAULT true,
    subject      text        COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (customer_id, metric, subject, quota_window, window_start, holder),
    CONSTRAINT counter_leases_counter_fkey FOREIGN KEY (customer_id, metric, subject, quota_window, window_start)
        REFERENCES usage_counters (customer_id, metric, subject, quota_window, window_start) ON DELETE CASCADE
);

-- Lease holders: the processes that hold (or held) leases, so that a dead
-- one's leases are reclaimed by the others.
--
-- A process registers its holder key when it first takes its advisory
-- lock (see quotad_holder_sessions), and clears gone_since each time it
-- takes the lock again. A running process finds, every few seconds, the
-- holders whose lock is gone: it marks when it first saw each gone
-- (gone_since), and once one has been gone for the reclaim bound, takes its
-- leases' units off their counters (as a settlement would, without the
-- metric's global usage, which no counter names) and deletes its row. An
-- admin may release a holder known dead at once.
CREATE TABLE lease_holders (
    holder     bigint      PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    gone_since timestamptz
);

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

-- Reservations (costs known only afterwards): an estimate counted as an
-- admitted check counts it, held until it is committed with the actual
-- cost, released, or expired. The units themselves are counted where every
-- check's are (usage_counters, leases, the shared short windows); a row
-- here is what tells that they are held, and what to give back.
CREATE TABLE reservations (
    -- 'rsv_' and 24 hex digits, random.
    id          text        COLLATE "C" PRIMARY KEY,
    customer_id text        COLLATE "C" NOT NULL,
    metric      text        COLLATE "C" NOT NULL,
    -- The estimate, counted in every window of the check.
    cost        bigint      NOT NULL CHECK (cost > 0),
    state       text        NOT NULL DEFAULT 'held'
                            CHECK (state IN ('held', 'committed', 'released', 'expired')),
    -- The actual cost, once committed; over is how many of its units went
    -- beyond what a check could have been admitted up to.
    committed   bigint      CHECK (committed >= 0),
    over        bigint      NOT NULL DEFAULT 0 CHECK (over >= 0),
    expires_at  timestamptz NOT NULL,
    -- When the estimate was counted: the window instances it counted in
    -- are resolved from it.
    created_at  timestamptz NOT NULL,
    settled_at  timestamptz,
    request_id  text,
    -- The window instances that hold the estimate: [{"metric", "subject",
    -- "window", "start", "end"}] (see quota.ReservedWindow), the end of a
    -- short window being its bucket's. A commit or a release gives units
    -- back only to those still current.
    windows     jsonb       NOT NULL,
    -- The reserve's answer, in the check answer's wire form: what a
    -- repeated request_id gets.
    answer      jsonb       NOT NULL,
    -- The subject the estimate was counted for ('' for the customer's own
    -- checks).
    subject     text        NOT NULL DEFAULT '',
    CHECK ((state = 'committed') = (committed IS NOT NULL))
);

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

-- Records --------------------------------------------------------------------

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

-- Every committed admin write, in the transaction of the write itself; a
-- refund is an event with action 'refund' (after: the metric, subject,
-- request_id, cost asked and units refunded), an admin's release of a
-- lease holder one with action 'release'. customer_id has no foreign key on
-- purpose: the trail outlives the customer.
CREATE TABLE audit_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor       text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('create', 'update', 'delete', 'reset', 'release', 'refund')),
    resource    text        NOT NULL,
    customer_id text        COLLATE "C",
    before      jsonb,
    after       jsonb
);

-- Object counts: how many customers and webhooks exist, kept by triggers in
-- the writing transaction (quotad_count_objects), so that the caps on them
-- (--max-customers, --max-webhooks) are checked without counting a table:
-- a creation reads the count its own insert raised, while it holds the
-- count's row lock, so concurrent creations at the cap cannot both pass.
-- The row lock serialises creations and deletions of one kind (not
-- updates) until they commit.
CREATE TABLE object_counts (
    kind text   COLLATE "C" PRIMARY KEY,
    n    bigint NOT NULL CHECK (n >= 0)
);

-- A receiver of usage events. The secret signs deliveries (Standard
-- Webhooks: "whsec_" and the base64 of the key); the API shows it once, at
-- creation, and a hint of it afterwards.
CREATE TABLE webhooks (
    id         text        COLLATE "C" PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    url        text        NOT NULL CHECK (url ~ '^https?://'),
    events     text[]      NOT NULL
        CHECK (events <@ ARRAY['usage.threshold', 'usage.overage_started', 'usage.limit_reached', 'grant.exhausted', 'trial.ended']),
    thresholds integer[]   NOT NULL CHECK (1 <= ALL (thresholds) AND 1000 >= ALL (thresholds)),
    secret     text        NOT NULL CHECK (secret ~ '^whsec_'),
    version    bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- What happened: to a long window's usage (a threshold percent of its
-- limit crossed, overage started, the first denial), to a grant (checks
-- drew its last unit: grant.exhausted) or to a customer (its trial ended
-- and it went back to its plan: trial.ended, whose metric is '' and which
-- names the trial's plan and the plan after it). A window's event happens
-- once per customer, metric, window start, type and threshold (0 for the
-- types that have none), whichever process saw it first; a grant's once
-- per grant; a trial's end once per customer and instant. No foreign keys:
-- events outlive customers and metrics, as history does.
CREATE TABLE usage_events (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type          text        NOT NULL
        CHECK (type IN ('usage.threshold', 'usage.overage_started', 'usage.limit_reached', 'grant.exhausted', 'trial.ended')),
    customer_id   text        COLLATE "C" NOT NULL,
    metric        text        COLLATE "C" NOT NULL,
    quota_window  text        CHECK (quota_window IN ('hour', 'day', 'week', 'month', 'total')),
    window_start  timestamptz,
    window_end    timestamptz CHECK (window_end > window_start),
    threshold     integer     NOT NULL CHECK (threshold BETWEEN 0 AND 1000),
    limit_value   bigint      NOT NULL CHECK (limit_value BETWEEN 0 AND 9007199254740991),
    used          bigint      NOT NULL CHECK (used BETWEEN 0 AND 9007199254740991),
    occurred_at   timestamptz NOT NULL,
    grant_id      text        COLLATE "C",
    plan_key      text        COLLATE "C",
    next_plan_key text        COLLATE "C",
    CONSTRAINT usage_events_once UNIQUE (customer_id, metric, quota_window, window_start, type, threshold),
    CONSTRAINT usage_events_grant_check CHECK (
        CASE type
            WHEN 'grant.exhausted' THEN grant_id IS NOT NULL AND quota_window IS NULL AND window_start IS NULL AND window_end IS NULL
            WHEN 'trial.ended' THEN grant_id IS NULL AND quota_window IS NULL AND window_start IS NULL AND window_end IS NULL
            ELSE grant_id IS NULL AND quota_window IS NOT NULL AND window_start IS NOT NULL AND window_end IS NOT NULL
        END),
    CONSTRAINT usage_events_plan_check CHECK (
        (type = 'trial.ended') = (plan_key IS NOT NULL AND next_plan_key IS NOT NULL))
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

-- Indexes --------------------------------------------------------------------
--
-- Besides the primary keys' and unique constraints'. Retention (see
-- docs/operations.md, "Retention") purges what grows in small batches by
-- age, each batch a short DELETE that must find its rows without reading
-- the whole table: the indexes "purged by" let it.

CREATE INDEX customers_plan_key_id ON customers (plan_key, id);
-- What quotad has to apply, soonest first.
CREATE INDEX customers_scheduled_at ON customers (scheduled_at) WHERE scheduled_at IS NOT NULL;
CREATE INDEX customers_trial_ends_at ON customers (trial_ends_at) WHERE trial_ends_at IS NOT NULL;

CREATE INDEX overrides_metric ON overrides (metric);

-- One open row per customer.
CREATE UNIQUE INDEX plan_assignments_open ON plan_assignments (customer_id) WHERE valid_to IS NULL;
CREATE INDEX plan_assignments_customer ON plan_assignments (customer_id, valid_from);
CREATE INDEX plan_assignments_open_plan ON plan_assignments (plan_key) WHERE valid_to IS NULL;

-- A customer's keys, listed by id.
CREATE INDEX api_keys_customer_id ON api_keys (customer_id, id);

-- Past windows' counters, purged by their start; it covers the key, so
-- that the purge finds each counter without reading the table.
CREATE INDEX usage_counters_window_start ON usage_counters (window_start, customer_id, metric, subject, quota_window);

-- Answers of idempotent checks, purged by age.
CREATE INDEX request_ids_created_at ON request_ids (created_at);

-- A request id names one reservation of a customer.
CREATE UNIQUE INDEX reservations_request_id ON reservations (customer_id, request_id) WHERE request_id IS NOT NULL;
-- What the expiry sweep reads: held reservations by expiry.
CREATE INDEX reservations_held_expiry ON reservations (expires_at) WHERE state = 'held';
-- Finished reservations, purged by when they settled; held ones are never
-- purged (reservations_held_expiry finds those).
CREATE INDEX reservations_settled ON reservations (settled_at) WHERE state <> 'held';

-- A customer's grants that may still be drawn, in drawing order.
CREATE INDEX grants_live ON grants (customer_id, metric, priority, expires_at)
    WHERE remaining > 0 AND voided_at IS NULL;
CREATE INDEX grant_draws_customer ON grant_draws (customer_id, drawn_at);
-- Past windows' granted units, purged by their start, as counters.
CREATE INDEX granted_usage_window_start ON granted_usage (window_start);

-- Daily history, purged by day.
CREATE INDEX usage_history_day ON usage_history (day);

-- The audit log: a customer's events, newest first; purged by when each
-- event happened.
CREATE INDEX audit_events_customer_id ON audit_events (customer_id, id DESC) WHERE customer_id IS NOT NULL;
CREATE INDEX audit_events_at ON audit_events (at);

-- Usage events, purged once their window has ended long enough ago; those
-- of grants and trials, which have no window, by age.
CREATE INDEX usage_events_window_end ON usage_events (window_end);
CREATE UNIQUE INDEX usage_events_grant_once ON usage_events (grant_id) WHERE grant_id IS NOT NULL;
CREATE INDEX usage_events_grant_occurred ON usage_events (occurred_at) WHERE grant_id IS NOT NULL;
CREATE UNIQUE INDEX usage_events_trial_once ON usage_events (customer_id, occurred_at) WHERE type = 'trial.ended';
CREATE INDEX usage_events_trial_occurred ON usage_events (occurred_at) WHERE type = 'trial.ended';

-- Deliveries due, the next attempt first.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- A webhook's deliveries, newest first.
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id DESC);
-- Delivered and failed deliveries, purged by their last attempt.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (last_attempt_at) WHERE status <> 'pending';
-- A usage event's deliveries: what tells whether any is left, and what
-- the foreign key's cascade reads when an event goes.
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- Meter events due, the next attempt first.
CREATE INDEX stripe_meter_events_due ON stripe_meter_events (next_attempt_at) WHERE status = 'pending';

-- The functions --------------------------------------------------------------
--
-- Every function of the schema, as the current protocol, in the order a
-- reader needs them (windows, holders, global usage, the lease calls,
-- object counts), each with its role in a comment on the function. A later
-- change to one is a migration after this one that restates it, and whose
-- down restores this body.

-- Windows --------------------------------------------------------------------

CREATE FUNCTION window_rank(w text) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN array_position(ARRAY['second', 'minute', 'hour', 'day', 'week', 'month', 'total'], w)::smallint;
COMMENT ON FUNCTION window_rank(text) IS
    'The rank of a window, shortest first (second 1 ... total 7), as tiers.Windows orders them: keyset pages of overrides compare with it, and every call locks counters (by customer, metric, subject, window, start) and then global usage (by metric, window, start) in its order of windows, so that none waits for another that waits for it.';

-- quotad_window_rank ranked the windows a counter may have; the lease calls
-- now order by window_rank, in the same order. Processes of schema 26 still
-- order counters by it (a reset, a reclaim), so it stays, with their ranks,
-- until a later migration that is not safe to roll for reasons of its own
-- drops it.
CREATE FUNCTION quotad_window_rank(p_window text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN window_rank(p_window) > 2 THEN window_rank(p_window) - 2 END
$$;
COMMENT ON FUNCTION quotad_window_rank(text) IS
    'Kept for processes of schema 26 only: window_rank among the windows a counter may have (hour 1 ... total 5, null for others).';

-- Holders --------------------------------------------------------------------

CREATE FUNCTION quotad_lock_class() RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT hashtext('quotad:' || current_schema())
$$;
COMMENT ON FUNCTION quotad_lock_class() IS
    'The first key of every holder''s advisory lock: this schema''s, so that the processes of two schemas of one database do not see each other.';

-- A lock of two int4 keys is filed in pg_locks as classid (the first, as an
-- unsigned oid), objid (the second), objsubid 2. Session locks of an
-- exclusive key: a holder's lock shows once, with the process that holds it.
CREATE FUNCTION quotad_holder_sessions() RETURNS TABLE (o_holder oid, o_pid integer)
LANGUAGE sql STABLE AS $$
    SELECT k.objid, k.pid FROM pg_locks k
    WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
      AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
      AND k.classid = (quotad_lock_class()::bigint & 4294967295)::oid
$$;
COMMENT ON FUNCTION quotad_holder_sessions() IS
    'The rule of who runs: a process runs while it holds, on a session of its own, the advisory lock (quotad_lock_class(), its holder key), which PostgreSQL releases when the process or its connection dies. One row per running holder: its key as an oid (a holder bigint h is (h & 4294967295)::oid) and the backend that holds the lock.';

-- PL/pgSQL, so that its statement is planned once per session.
CREATE FUNCTION quotad_live_holders() RETURNS oid[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN ARRAY(SELECT k.o_holder FROM quotad_holder_sessions() k);
END
$$;
COMMENT ON FUNCTION quotad_live_holders() IS
    'The keys of the running holders (quotad_holder_sessions), read once per statement: the view quotad_live_leases, quotad_lease_all and the list of holders compare leases'' holders with it.';

CREATE FUNCTION quotad_holder_alive(p_holder bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM quotad_holder_sessions() k WHERE k.o_holder = (p_holder & 4294967295)::oid)
$$;
COMMENT ON FUNCTION quotad_holder_alive(bigint) IS
    'Whether holder p_holder runs (quotad_holder_sessions): a holder that does not is dead, and its leases may be reclaimed.';

CREATE FUNCTION quotad_others_alive(p_holder bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM quotad_holder_sessions() k WHERE k.o_holder <> (p_holder & 4294967295)::oid)
$$;
COMMENT ON FUNCTION quotad_others_alive(bigint) IS
    'Whether any holder other than p_holder runs on this schema (quotad_holder_sessions): when none does, no lease of another process can be recalled.';

-- Global usage ---------------------------------------------------------------

-- Units are added to one of 16 shards at random, so that grants of one
-- metric do not all wait for one row.
CREATE FUNCTION quotad_count_global(p_metric text, p_window text, p_start timestamptz, p_units bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_units = 0 THEN
        RETURN;
    ELSIF p_units > 0 THEN
        INSERT INTO metric_usage AS g (metric, quota_window, window_start, shard, used)
        VALUES (p_metric, p_window, p_start, floor(random() * 16)::smallint, p_units)
        ON CONFLICT (metric, quota_window, window_start, shard) DO UPDATE SET used = g.used + EXCLUDED.used;
        RETURN;
    END IF;
    -- Each shard gives what is left to take once the fuller ones gave
    -- theirs, at most all it has.
    WITH s AS MATERIALIZED (
        SELECT g.shard, g.used FROM metric_usage g
        WHERE g.metric = p_metric AND g.quota_window = p_window AND g.window_start = p_start AND g.used > 0
        ORDER BY g.shard
        FOR UPDATE
    ), t AS (
        SELECT s.shard, LEAST(s.used, -p_units - (sum(s.used) OVER (ORDER BY s.used DESC, s.shard) - s.used)) AS took
        FROM s
    )
    UPDATE metric_usage g SET used = g.used - t.took
    FROM t
    WHERE g.metric = p_metric AND g.quota_window = p_window AND g.window_start = p_start
      AND g.shard = t.shard AND t.took > 0;
END
$$;
COMMENT ON FUNCTION quotad_count_global(text, text, timestamptz, bigint) IS
    'Adds p_units to a metric''s global usage in one window (metric_usage), or takes them off when negative: from the fullest shard first, never below zero, the window''s shards locked in shard order.';

CREATE FUNCTION quotad_add_global(p_metrics text[], p_windows text[], p_starts timestamptz[], p_units bigint[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    d record;
BEGIN
    FOR d IN
        SELECT u.metric, u.quota_window, u.window_start, sum(u.units)::bigint AS units
        FROM unnest(p_metrics, p_windows, p_starts, p_units) AS u(metric, quota_window, window_start, units)
        WHERE u.units <> 0
        GROUP BY u.metric, u.quota_window, u.window_start
        HAVING sum(u.units) <> 0
        ORDER BY u.metric COLLATE "C", window_rank(u.quota_window), u.window_start
    LOOP
        PERFORM quotad_count_global(d.metric, d.quota_window, d.window_start, d.units);
    END LOOP;
END
$$;
COMMENT ON FUNCTION quotad_add_global(text[], text[], timestamptz[], bigint[]) IS
    'Adds units to metrics'' global usage, summed by window, the windows in the order of locks (metric, window_rank, start), after the counters: the lease calls and the ledger''s charges and give-backs count global usage through it.';

-- Leases ---------------------------------------------------------------------
--
-- A lease is a block of a counter's units a process (its holder) reserves
-- with one conditional update, then admits checks from in memory. A
-- counter's used counts every unit granted, admitted or held unused in
-- leases, so a window stays within its bound however many processes hold
-- leases. Every call a holder makes on a lease (a grant, a report, a
-- settlement) carries a sequence number, increasing within the holder; the
-- lease row keeps the last one applied, so a late copy of a call changes
-- nothing, and quotad_resolve tells a holder what a call whose answer it
-- lost did. A settled lease keeps its row (held false) until its counter
-- goes, so that the fence outlives the lease. A batch holds at most one
-- call per counter, so no call of it depends on another: each batch is
-- decided as one set.
--
-- Every call locks counters first, in the order of the key (customer,
-- metric, subject, window_rank, start), then global usage; quotad_report
-- locks leases, in the same order, and no counter.
--
-- The batch functions always look counters and leases up by key (their SET
-- clauses): left to statistics, a plan made while a table was small (after
-- a deploy, before autovacuum) may scan it once per batch.

-- A counter it creates holds its grant from its insert: an update after
-- the insert would make PostgreSQL check the new row's foreign keys again.
-- Fresh counters are told by their xmin, so it refuses to run in a
-- transaction that wrote before it. Who runs (pg_locks) is read only when a
-- grant must know what other live holders hold unused.
CREATE FUNCTION quotad_lease_all(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_bounds bigint[], p_needs bigint[], p_extras bigint[],
    p_inflights bigint[], p_helds boolean[], p_global_starts timestamptz[], p_channel text, p_payloads text[])
RETURNS TABLE (o_i integer, o_granted bigint, o_used bigint, o_others bigint, o_lost boolean, o_gone boolean)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    v_n integer := coalesce(array_length(p_customers, 1), 0);
    v_units bigint[] := array_fill(0::bigint, ARRAY[v_n]);
    r record;
BEGIN
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'quotad_lease_all must run in a transaction of its own';
    END IF;
    -- A counter is created only when the need alone fits, and its customer
    -- and metric exist, holding what the grant below would grant it: the
    -- need and the extra, within the bound; nothing if the caller believes
    -- it holds a lease there (lost: a counter that did not exist holds no
    -- lease). The arrays' text has the database's collation: sorted as "C",
    -- as the key is.
    INSERT INTO usage_counters (customer_id, metric, subject, quota_window, window_start, used)
    SELECT s.customer_id, s.metric, s.subject, s.quota_window, s.window_start,
           CASE WHEN s.held THEN 0 ELSE LEAST(s.need + s.extra, s.bound) END
    FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts, p_needs, p_bounds, p_extras, p_helds)
        AS s(customer_id, metric, subject, quota_window, window_start, need, bound, extra, held)
    WHERE s.need <= s.bound
      AND EXISTS (SELECT 1 FROM customers u WHERE u.id = s.customer_id)
      AND EXISTS (SELECT 1 FROM metrics m WHERE m.key = s.metric)
    ORDER BY s.customer_id COLLATE "C", s.metric COLLATE "C", s.subject COLLATE "C",
             window_rank(s.quota_window), s.window_start
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, c.subject, window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    -- Every grant at once: each counter is its own (one call per counter),
    -- so no grant depends on another. The counters are locked; the
    -- statement sees them as they are now.
    FOR r IN
        WITH item AS (
            SELECT * FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts, p_seqs, p_bounds, p_needs,
                                 p_extras, p_inflights, p_helds)
                WITH ORDINALITY AS t(customer_id, metric, subject, quota_window, window_start, seq, bound, need,
                                     extra, inflight, held, i)
        ), cur AS MATERIALIZED (
            -- A fresh counter (created above) is judged as it was before
            -- its insert: empty. Its grant is in it already.
            SELECT t.*, CASE WHEN c.xmin = pg_current_xact_id()::xid THEN 0 ELSE c.used END AS used,
                   coalesce(c.xmin = pg_current_xact_id()::xid, false) AS fresh,
                   c.watched, c.customer_id IS NOT NULL AS counted,
                   l.seq AS last_seq, coalesce(l.held, false) AS holding
            FROM item t
            LEFT JOIN usage_counters c
              ON c.customer_id = t.customer_id AND c.metric = t.metric AND c.subject = t.subject
             AND c.quota_window = t.quota_window AND c.window_start = t.window_start
            -- One lookup per call, by the whole key (joined, the holder's
            -- every lease may be scanned for it).
            LEFT JOIN LATERAL (
                SELECT l.seq, l.held FROM counter_leases l
                WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.subject = t.subject
                  AND l.quota_window = t.quota_window AND l.window_start = t.window_start AND l.holder = p_holder
                LIMIT 1) l ON true
        ), judged AS MATERIALIZED (
            SELECT cur.*,
                   -- late: a copy of a call already decided; lost: the
                   -- caller believes it holds a lease the store does not
                   counted AND coalesce(last_seq >= seq, false) AS late,
                   (NOT counted AND held)
                       OR (counted AND NOT coalesce(last_seq >= seq, false) AND held AND NOT holding) AS lost
            FROM cur
        ), decided AS MATERIALIZED (
            SELECT judged.*, counted AND NOT late AND NOT lost AS asked,
                   CASE WHEN counted AND NOT late AND NOT lost AND used + need <= bound
                        THEN LEAST(need + extra, bound - used) ELSE 0 END AS granted
            FROM judged
        ), counted_up AS (
            UPDATE usage_counters c SET used = c.used + d.granted
            FROM decided d
            WHERE c.customer_id = d.customer_id AND c.metric = d.metric AND c.subject = d.subject
              AND c.quota_window = d.quota_window AND c.window_start = d.window_start AND d.granted > 0
              AND NOT d.fresh
        ), leased AS (
            INSERT INTO counter_leases AS l (customer_id, metric, subject, quota_window, window_start, holder,
                                             unused, seq, granted, held, fenced)
            SELECT d.customer_id, d.metric, d.subject, d.quota_window, d.window_start, p_holder,
                   d.granted - d.need + d.inflight, d.seq, d.granted, true, false
            FROM decided d WHERE d.granted > 0
            ON CONFLICT (customer_id, metric, subject, quota_window, window_start, holder)
            DO UPDATE SET unused = EXCLUDED.unused, seq = EXCLUDED.seq, granted = EXCLUDED.granted,
                          held = true, fenced = false
        )
        SELECT d.i::integer AS i, d.granted, coalesce(d.used, 0) + d.granted AS used_after,
               CASE WHEN d.asked THEN (
                   SELECT coalesce(sum(l.unused), 0) FROM counter_leases l
                   WHERE l.customer_id = d.customer_id AND l.metric = d.metric AND l.subject = d.subject
                     AND l.quota_window = d.quota_window AND l.window_start = d.window_start
                     AND l.holder <> p_holder AND l.unused > 0
                     AND (l.holder & 4294967295)::oid = ANY ((SELECT quotad_live_holders())::oid[]))
               ELSE 0 END::bigint AS others,
               d.asked, d.counted, d.watched, d.lost
        FROM decided d
        ORDER BY d.i
    LOOP
        o_i := r.i; o_granted := r.granted; o_used := r.used_after; o_others := r.others;
        o_lost := r.lost; o_gone := false;
        IF NOT r.counted THEN -- the need alone is above the bound, or the customer went
            o_gone := NOT EXISTS (SELECT 1 FROM customers u WHERE u.id = p_customers[r.i])
                   OR NOT EXISTS (SELECT 1 FROM metrics m WHERE m.key = p_metrics[r.i]);
        ELSIF r.asked AND r.granted = 0 AND r.others > 0 AND p_channel IS NOT NULL THEN
            PERFORM pg_notify(p_channel, p_payloads[r.i]);
        ELSIF r.asked AND r.granted = 0 AND r.others = 0 AND NOT r.watched THEN
            UPDATE usage_counters c SET watched = true
            WHERE c.customer_id = p_customers[r.i] AND c.metric = p_metrics[r.i] AND c.subject = p_subjects[r.i]
              AND c.quota_window = p_windows[r.i] AND c.window_start = p_starts[r.i];
        END IF;
        IF r.granted > 0 AND p_global_starts[r.i] IS NOT NULL THEN
            v_units[r.i] := r.granted;
        END IF;
        RETURN NEXT;
    END LOOP;
    PERFORM quotad_add_global(p_metrics, p_windows, p_global_starts, v_units);
END
$$;
COMMENT ON FUNCTION quotad_lease_all(text[], text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], bigint[],
                                     bigint[], bigint[], boolean[], timestamptz[], text, text[]) IS
    'Grants, for each i, counter i (p_customers[i], p_metrics[i], p_subjects[i], p_windows[i] from p_starts[i]) to holder p_holder in its call p_seqs[i]: p_needs[i] units all or none and up to p_extras[i] more to hold, within p_bounds[i]; the lease then reports p_inflights[i] units in flight besides. p_helds[i]: the caller believes it holds a lease there (none held: o_lost, nothing granted). p_global_starts[i]: the granted units count in the metric''s global usage too. One row per counter: what was granted, the counter after, the units other live holders hold unused, o_lost, and o_gone (the customer or metric was deleted). When nothing is granted, the other live holders are asked for their units (p_payloads[i] on p_channel, unless null), or, when none holds any, the counter is marked watched.';

-- Its transaction commits without waiting for the disk: a settlement lost
-- in a crash of PostgreSQL only leaves units counted that were not used.
-- So it runs in a transaction of its own.
CREATE FUNCTION quotad_settle_all(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_unused bigint[], p_global_starts timestamptz[], p_channel text,
    p_payloads text[])
RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    v_n integer := coalesce(array_length(p_customers, 1), 0);
    v_back bigint[] := array_fill(0::bigint, ARRAY[v_n]);
    r record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, c.subject, window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    FOR r IN
        WITH item AS (
            SELECT * FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts, p_seqs, p_unused)
                WITH ORDINALITY AS t(customer_id, metric, subject, quota_window, window_start, seq, unused, i)
        ), settled AS (
            -- Only a lease the store holds, and not by a later call.
            UPDATE counter_leases l SET held = false, unused = 0, granted = 0, seq = t.seq, fenced = false
            FROM item t
            WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.subject = t.subject
              AND l.quota_window = t.quota_window AND l.window_start = t.window_start AND l.holder = p_holder
              AND l.held AND l.seq < t.seq
            RETURNING t.i, t.customer_id, t.metric, t.subject, t.quota_window, t.window_start, t.unused
        ), back AS MATERIALIZED (
            SELECT s.i, s.customer_id, s.metric, s.subject, s.quota_window, s.window_start,
                   LEAST(s.unused, c.used) AS units, c.watched
            FROM settled s
            JOIN usage_counters c
              ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
             AND c.quota_window = s.quota_window AND c.window_start = s.window_start
        ), given AS (
            UPDATE usage_counters c SET used = c.used - b.units, watched = c.watched AND b.units = 0
            FROM back b
            WHERE c.customer_id = b.customer_id AND c.metric = b.metric AND c.subject = b.subject
              AND c.quota_window = b.quota_window AND c.window_start = b.window_start AND b.units > 0
        )
        SELECT b.i::integer AS i, b.units, b.watched FROM back b WHERE b.units > 0
    LOOP
        IF p_global_starts[r.i] IS NOT NULL THEN
            v_back[r.i] := -r.units;
        END IF;
        IF r.watched AND p_channel IS NOT NULL THEN
            PERFORM pg_notify(p_channel, p_payloads[r.i]);
        END IF;
    END LOOP;
    PERFORM quotad_add_global(p_metrics, p_windows, p_global_starts, v_back);
END
$$;
COMMENT ON FUNCTION quotad_settle_all(text[], text[], text[], text[], timestamptz[], bigint, bigint[], bigint[],
                                      timestamptz[], text, text[]) IS
    'Ends p_holder''s leases of counters i in its calls p_seqs[i]: the p_unused[i] units each held unused come off the counter (and off the metric''s global usage where p_global_starts[i]). A lease the store no longer holds (a reset ended it, with its units), or one a later call already decided, gives nothing back. Where units came back to a watched counter, p_payloads[i] goes out on p_channel.';

-- Like quotad_settle_all, its transaction commits without waiting for the
-- disk, so it runs in one of its own.
CREATE FUNCTION quotad_report(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_unused bigint[], p_channel text, p_payloads text[])
RETURNS SETOF integer
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    r record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    -- The leases are locked first, in the counters' order (a report locks
    -- no counter).
    PERFORM 1 FROM counter_leases l
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON l.customer_id = s.customer_id AND l.metric = s.metric AND l.subject = s.subject
     AND l.quota_window = s.quota_window AND l.window_start = s.window_start AND l.holder = p_holder
    ORDER BY l.customer_id, l.metric, l.subject, window_rank(l.quota_window), l.window_start
    FOR UPDATE OF l;
    FOR r IN
        WITH item AS (
            SELECT * FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts, p_seqs, p_unused)
                WITH ORDINALITY AS t(customer_id, metric, subject, quota_window, window_start, seq, unused, i)
        ), cur AS MATERIALIZED (
            SELECT t.i, t.customer_id, t.metric, t.subject, t.quota_window, t.window_start, t.seq, t.unused,
                   l.held, l.seq AS last_seq, l.unused AS was
            FROM item t
            LEFT JOIN LATERAL (
                SELECT l.held, l.seq, l.unused FROM counter_leases l
                WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.subject = t.subject
                  AND l.quota_window = t.quota_window AND l.window_start = t.window_start AND l.holder = p_holder
                LIMIT 1) l ON true
        ), reported AS (
            UPDATE counter_leases l SET unused = t.unused, seq = t.seq, fenced = false
            FROM cur t
            WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.subject = t.subject
              AND l.quota_window = t.quota_window AND l.window_start = t.window_start AND l.holder = p_holder
              AND t.held AND t.last_seq < t.seq
        )
        SELECT cur.i::integer AS i, NOT coalesce(cur.held, false) AS lost,
               coalesce(cur.held AND cur.last_seq < cur.seq AND cur.unused > cur.was, false) AS more
        FROM cur
    LOOP
        IF r.lost THEN
            RETURN NEXT r.i;
        ELSIF r.more AND p_channel IS NOT NULL THEN
            PERFORM quotad_freed(p_customers[r.i], p_metrics[r.i], p_subjects[r.i], p_windows[r.i], p_starts[r.i],
                                 p_channel, p_payloads[r.i]);
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION quotad_report(text[], text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], text,
                                  text[]) IS
    'Records, in call p_seqs[i], that p_holder holds p_unused[i] units unused in its lease of counter i, and returns the positions (from 1) of the leases the store no longer holds. A lease reported to hold more than before makes units recallable: a watched counter is told (quotad_freed).';

CREATE FUNCTION quotad_freed(
    p_customer text, p_metric text, p_subject text, p_window text, p_start timestamptz,
    p_channel text, p_payload text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE usage_counters c SET watched = false
    WHERE c.customer_id = p_customer AND c.metric = p_metric AND c.subject = p_subject
      AND c.quota_window = p_window AND c.window_start = p_start AND c.watched;
    IF FOUND THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
END
$$;
COMMENT ON FUNCTION quotad_freed(text, text, text, text, timestamptz, text, text) IS
    'Clears a counter''s watched mark and, if it was set, tells every process (p_payload on p_channel) that units came back to it: every call that gives units back calls it once they are back.';

CREATE FUNCTION quotad_recall(
    p_customer text, p_metric text, p_subject text, p_window text, p_start timestamptz,
    p_holder bigint, p_channel text, p_payload text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_leases integer;
BEGIN
    SELECT count(*) INTO v_leases FROM quotad_live_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.subject = p_subject
      AND l.quota_window = p_window AND l.window_start = p_start AND l.holder <> p_holder AND l.unused > 0;
    IF v_leases > 0 THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
    RETURN v_leases;
END
$$;
COMMENT ON FUNCTION quotad_recall(text, text, text, text, timestamptz, bigint, text, text) IS
    'Asks the other live holders whose leases of a counter hold units unused to settle them (p_payload on p_channel, when there is any such lease), and returns how many such leases there are.';

-- A fence needs the lease's row, and a row needs its counter's: it creates
-- them where they are missing (the counter at 0, the lease not held),
-- unless the customer or metric is gone.
CREATE FUNCTION quotad_resolve(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[])
RETURNS TABLE (o_i integer, o_applied boolean, o_held boolean, o_unused bigint, o_granted bigint)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    v_seq bigint;
    v_held boolean;
    v_unused bigint;
    v_granted bigint;
    v_fenced boolean;
BEGIN
    INSERT INTO usage_counters (customer_id, metric, subject, quota_window, window_start, used)
    SELECT s.customer_id, s.metric, s.subject, s.quota_window, s.window_start, 0
    FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
    WHERE EXISTS (SELECT 1 FROM customers u WHERE u.id = s.customer_id)
      AND EXISTS (SELECT 1 FROM metrics m WHERE m.key = s.metric)
    ORDER BY s.customer_id COLLATE "C", s.metric COLLATE "C", s.subject COLLATE "C",
             window_rank(s.quota_window), s.window_start
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, c.subject, window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    FOR i IN 1 .. coalesce(array_length(p_customers, 1), 0) LOOP
        SELECT l.seq, l.held, l.unused, l.granted, l.fenced INTO v_seq, v_held, v_unused, v_granted, v_fenced
        FROM counter_leases l
        WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.subject = p_subjects[i]
          AND l.quota_window = p_windows[i] AND l.window_start = p_starts[i] AND l.holder = p_holder;
        IF FOUND AND v_seq = p_seqs[i] AND NOT v_fenced THEN
            o_i := i; o_applied := true; o_held := v_held; o_unused := v_unused; o_granted := v_granted;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF FOUND AND v_seq < p_seqs[i] THEN
            UPDATE counter_leases l SET seq = p_seqs[i], fenced = true
            WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.subject = p_subjects[i]
              AND l.quota_window = p_windows[i] AND l.window_start = p_starts[i] AND l.holder = p_holder;
        ELSIF NOT FOUND THEN
            INSERT INTO counter_leases (customer_id, metric, subject, quota_window, window_start, holder,
                                        unused, seq, granted, held, fenced)
            SELECT c.customer_id, c.metric, c.subject, c.quota_window, c.window_start, p_holder, 0, p_seqs[i], 0,
                   false, true
            FROM usage_counters c
            WHERE c.customer_id = p_customers[i] AND c.metric = p_metrics[i] AND c.subject = p_subjects[i]
              AND c.quota_window = p_windows[i] AND c.window_start = p_starts[i];
        END IF;
        o_i := i; o_applied := false; o_held := coalesce(v_held, false); o_unused := coalesce(v_unused, 0);
        o_granted := 0;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION quotad_resolve(text[], text[], text[], text[], timestamptz[], bigint, bigint[]) IS
    'Tells p_holder whether its call p_seqs[i] on its lease of counter i, whose answer it never got, was applied, and fences off one that was not: a copy arriving later changes nothing, and asked again it answers the same. One row per counter: whether the call was applied, and the lease as the store holds it now (held, unused units, and what the call granted if it was an applied grant).';

-- Object counts --------------------------------------------------------------

CREATE FUNCTION quotad_count_objects() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE object_counts
    SET n = CASE TG_OP WHEN 'INSERT' THEN n + 1 WHEN 'DELETE' THEN n - 1 ELSE 0 END
    WHERE kind = TG_TABLE_NAME;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION quotad_count_objects() IS
    'The trigger that keeps object_counts: the rows of the table it is on (customers, webhooks), by its name, in the writing transaction, so that the caps on them are checked without counting a table.';

-- What stands on the functions -----------------------------------------------

-- quotad_live_leases are the leases whose holders run. A statement reads
-- the advisory locks once (the sub-select is evaluated once, and only if a
-- lease is read), where quotad_holder_alive reads them once per lease.
CREATE VIEW quotad_live_leases AS
SELECT l.customer_id, l.metric, l.subject, l.quota_window, l.window_start, l.holder, l.unused
FROM counter_leases l
WHERE (l.holder & 4294967295)::oid = ANY ((SELECT quotad_live_holders())::oid[]);

-- object_counts is kept from the first customer and webhook on.
INSERT INTO object_counts (kind, n) VALUES ('customers', 0), ('webhooks', 0);

CREATE TRIGGER customers_count AFTER INSERT OR DELETE ON customers
    FOR EACH ROW EXECUTE FUNCTION quotad_count_objects();
CREATE TRIGGER webhooks_count AFTER INSERT OR DELETE ON webhooks
    FOR EACH ROW EXECUTE FUNCTION quotad_count_objects();
CREATE TRIGGER customers_truncate AFTER TRUNCATE ON customers
    FOR EACH STATEMENT EXECUTE FUNCTION quotad_count_objects();
CREATE TRIGGER webhooks_truncate AFTER TRUNCATE ON webhooks
    FOR EACH STATEMENT EXECUTE FUNCTION quotad_count_objects();
