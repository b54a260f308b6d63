-- The schema of migrations 1 to 27 as they leave a fresh database, as PostgreSQL 15 prints its catalog.
-- Written by go test ./internal/store -run TestSchemaDump -update; TestSchemaDump fails when the migrations make another.

CREATE TABLE api_keys (
    id text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    name text NOT NULL DEFAULT ''::text,
    prefix text NOT NULL,
    digest bytea NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone
);
ALTER TABLE api_keys ADD CONSTRAINT api_keys_check CHECK ((expires_at > created_at));
ALTER TABLE api_keys ADD CONSTRAINT api_keys_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers(id) ON DELETE CASCADE;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_digest_check CHECK ((octet_length(digest) = 32));
ALTER TABLE api_keys ADD CONSTRAINT api_keys_digest_key UNIQUE (digest);
ALTER TABLE api_keys ADD CONSTRAINT api_keys_id_check CHECK ((id ~ '^key_[A-Za-z0-9]{16,64}$'::text));
ALTER TABLE api_keys ADD CONSTRAINT api_keys_name_check CHECK ((char_length(name) <= 100));
ALTER TABLE api_keys ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);
ALTER TABLE api_keys ADD CONSTRAINT api_keys_prefix_check CHECK ((char_length(prefix) = 8));
CREATE INDEX api_keys_customer_id ON api_keys USING btree (customer_id, id);
CREATE UNIQUE INDEX api_keys_digest_key ON api_keys USING btree (digest);
CREATE UNIQUE INDEX api_keys_pkey ON api_keys USING btree (id);

CREATE TABLE audit_events (
    id bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    at timestamp with time zone NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    resource text NOT NULL,
    customer_id text COLLATE "C",
    before jsonb,
    after jsonb
);
ALTER TABLE audit_events ADD CONSTRAINT audit_events_action_check CHECK ((action = ANY (ARRAY['create'::text, 'update'::text, 'delete'::text, 'reset'::text, 'release'::text, 'refund'::text])));
ALTER TABLE audit_events ADD CONSTRAINT audit_events_pkey PRIMARY KEY (id);
CREATE INDEX audit_events_at ON audit_events USING btree (at);
CREATE INDEX audit_events_customer_id ON audit_events USING btree (customer_id, id DESC) WHERE (customer_id IS NOT NULL);
CREATE UNIQUE INDEX audit_events_pkey ON audit_events USING btree (id);

CREATE TABLE counter_leases (
    customer_id text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    quota_window text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    holder bigint NOT NULL,
    unused bigint NOT NULL,
    seq bigint NOT NULL DEFAULT 0,
    granted bigint NOT NULL DEFAULT 0,
    fenced boolean NOT NULL DEFAULT false,
    held boolean NOT NULL DEFAULT true,
    subject text COLLATE "C" NOT NULL DEFAULT ''::text
);
ALTER TABLE counter_leases ADD CONSTRAINT counter_leases_counter_fkey FOREIGN KEY (customer_id, metric, subject, quota_window, window_start) REFERENCES usage_counters(customer_id, metric, subject, quota_window, window_start) ON DELETE CASCADE;
ALTER TABLE counter_leases ADD CONSTRAINT counter_leases_granted_check CHECK ((granted >= 0));
ALTER TABLE counter_leases ADD CONSTRAINT counter_leases_pkey PRIMARY KEY (customer_id, metric, subject, quota_window, window_start, holder);
ALTER TABLE counter_leases ADD CONSTRAINT counter_leases_unused_check CHECK ((unused >= 0));
CREATE UNIQUE INDEX counter_leases_pkey ON counter_leases USING btree (customer_id, metric, subject, quota_window, window_start, holder);

CREATE TABLE credit_rates (
    pool text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    credits bigint NOT NULL,
    per bigint NOT NULL DEFAULT 1,
    position smallint NOT NULL
);
ALTER TABLE credit_rates ADD CONSTRAINT credit_rates_credits_check CHECK (((credits >= 1) AND (credits <= '9007199254740991'::bigint)));
ALTER TABLE credit_rates ADD CONSTRAINT credit_rates_metric_fkey FOREIGN KEY (metric) REFERENCES metrics(key) ON DELETE RESTRICT;
ALTER TABLE credit_rates ADD CONSTRAINT credit_rates_not_self CHECK ((pool <> metric));
ALTER TABLE credit_rates ADD CONSTRAINT credit_rates_one_pool UNIQUE (metric);
ALTER TABLE credit_rates ADD CONSTRAINT credit_rates_per_check CHECK (((per >= 1) AND (per <= '9007199254740991'::bigint)));
ALTER TABLE credit_rates ADD CONSTRAINT credit_rates_pkey PRIMARY KEY (pool, metric);
ALTER TABLE credit_rates ADD CONSTRAINT credit_rates_pool_fkey FOREIGN KEY (pool) REFERENCES metrics(key) ON DELETE CASCADE;
ALTER TABLE credit_rates ADD CONSTRAINT credit_rates_position UNIQUE (pool, "position");
ALTER TABLE credit_rates ADD CONSTRAINT credit_rates_position_check CHECK (("position" >= 0));
CREATE UNIQUE INDEX credit_rates_one_pool ON credit_rates USING btree (metric);
CREATE UNIQUE INDEX credit_rates_pkey ON credit_rates USING btree (pool, metric);
CREATE UNIQUE INDEX credit_rates_position ON credit_rates USING btree (pool, "position");

CREATE TABLE customers (
    id text COLLATE "C" NOT NULL,
    plan_key text COLLATE "C" NOT NULL,
    name text NOT NULL DEFAULT ''::text,
    billing_anchor_day smallint,
    anchor_pinned_start timestamp with time zone,
    anchor_pinned_end timestamp with time zone,
    metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    version bigint NOT NULL DEFAULT 1,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    status text NOT NULL DEFAULT 'active'::text,
    status_reason text NOT NULL DEFAULT ''::text,
    scheduled_plan_key text COLLATE "C",
    scheduled_at timestamp with time zone,
    trial_plan_key text COLLATE "C",
    trial_ends_at timestamp with time zone,
    plan_version bigint NOT NULL DEFAULT 1,
    time_zone text NOT NULL DEFAULT 'UTC'::text,
    day_pinned_start timestamp with time zone,
    day_pinned_end timestamp with time zone,
    week_pinned_start timestamp with time zone,
    week_pinned_end timestamp with time zone
);
ALTER TABLE customers ADD CONSTRAINT customers_anchor_pin_complete CHECK ((((anchor_pinned_start IS NULL) AND (anchor_pinned_end IS NULL)) OR (anchor_pinned_start < anchor_pinned_end)));
ALTER TABLE customers ADD CONSTRAINT customers_billing_anchor_day_check CHECK (((billing_anchor_day >= 1) AND (billing_anchor_day <= 28)));
ALTER TABLE customers ADD CONSTRAINT customers_day_pin_complete CHECK ((((day_pinned_start IS NULL) AND (day_pinned_end IS NULL)) OR (day_pinned_start < day_pinned_end)));
ALTER TABLE customers ADD CONSTRAINT customers_id_check CHECK ((id ~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$'::text));
ALTER TABLE customers ADD CONSTRAINT customers_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text));
ALTER TABLE customers ADD CONSTRAINT customers_pkey PRIMARY KEY (id);
ALTER TABLE customers ADD CONSTRAINT customers_plan_key_fkey FOREIGN KEY (plan_key) REFERENCES plans(key) ON DELETE RESTRICT;
ALTER TABLE customers ADD CONSTRAINT customers_plan_version FOREIGN KEY (plan_key, plan_version) REFERENCES plan_versions(plan_key, version);
ALTER TABLE customers ADD CONSTRAINT customers_scheduled_complete CHECK (((scheduled_plan_key IS NULL) = (scheduled_at IS NULL)));
ALTER TABLE customers ADD CONSTRAINT customers_scheduled_plan_key_fkey FOREIGN KEY (scheduled_plan_key) REFERENCES plans(key) ON DELETE RESTRICT;
ALTER TABLE customers ADD CONSTRAINT customers_status_check CHECK ((status = ANY (ARRAY['active'::text, 'suspended'::text])));
ALTER TABLE customers ADD CONSTRAINT customers_status_reason_check CHECK ((char_length(status_reason) <= 500));
ALTER TABLE customers ADD CONSTRAINT customers_time_zone_check CHECK ((time_zone <> ''::text));
ALTER TABLE customers ADD CONSTRAINT customers_trial_complete CHECK (((trial_plan_key IS NULL) = (trial_ends_at IS NULL)));
ALTER TABLE customers ADD CONSTRAINT customers_trial_plan_key_fkey FOREIGN KEY (trial_plan_key) REFERENCES plans(key) ON DELETE RESTRICT;
ALTER TABLE customers ADD CONSTRAINT customers_version_check CHECK ((version >= 1));
ALTER TABLE customers ADD CONSTRAINT customers_week_pin_complete CHECK ((((week_pinned_start IS NULL) AND (week_pinned_end IS NULL)) OR (week_pinned_start < week_pinned_end)));
CREATE UNIQUE INDEX customers_pkey ON customers USING btree (id);
CREATE INDEX customers_plan_key_id ON customers USING btree (plan_key, id);
CREATE INDEX customers_scheduled_at ON customers USING btree (scheduled_at) WHERE (scheduled_at IS NOT NULL);
CREATE INDEX customers_trial_ends_at ON customers USING btree (trial_ends_at) WHERE (trial_ends_at IS NOT NULL);
CREATE TRIGGER customers_count AFTER INSERT OR DELETE ON customers FOR EACH ROW EXECUTE FUNCTION quotad_count_objects();
CREATE TRIGGER customers_truncate AFTER TRUNCATE ON customers FOR EACH STATEMENT EXECUTE FUNCTION quotad_count_objects();

CREATE TABLE feature_overrides (
    customer_id text COLLATE "C" NOT NULL,
    feature text COLLATE "C" NOT NULL,
    value jsonb NOT NULL,
    expires_at timestamp with time zone,
    reason text NOT NULL DEFAULT ''::text,
    version bigint NOT NULL DEFAULT 1,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL
);
ALTER TABLE feature_overrides ADD CONSTRAINT feature_overrides_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers(id) ON DELETE CASCADE;
ALTER TABLE feature_overrides ADD CONSTRAINT feature_overrides_feature_check CHECK ((feature ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'::text));
ALTER TABLE feature_overrides ADD CONSTRAINT feature_overrides_pkey PRIMARY KEY (customer_id, feature);
ALTER TABLE feature_overrides ADD CONSTRAINT feature_overrides_value_check CHECK ((jsonb_typeof(value) = ANY (ARRAY['boolean'::text, 'number'::text, 'string'::text])));
ALTER TABLE feature_overrides ADD CONSTRAINT feature_overrides_version_check CHECK ((version >= 1));
CREATE UNIQUE INDEX feature_overrides_pkey ON feature_overrides USING btree (customer_id, feature);

CREATE TABLE grant_draws (
    id bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    grant_id text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    units bigint NOT NULL,
    drawn_at timestamp with time zone NOT NULL
);
ALTER TABLE grant_draws ADD CONSTRAINT grant_draws_grant_id_fkey FOREIGN KEY (grant_id) REFERENCES grants(id) ON DELETE CASCADE;
ALTER TABLE grant_draws ADD CONSTRAINT grant_draws_pkey PRIMARY KEY (id);
ALTER TABLE grant_draws ADD CONSTRAINT grant_draws_units_check CHECK ((units <> 0));
CREATE INDEX grant_draws_customer ON grant_draws USING btree (customer_id, drawn_at);
CREATE UNIQUE INDEX grant_draws_pkey ON grant_draws USING btree (id);

CREATE TABLE granted_usage (
    customer_id text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    quota_window text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    granted bigint NOT NULL
);
ALTER TABLE granted_usage ADD CONSTRAINT granted_usage_granted_check CHECK ((granted >= 0));
ALTER TABLE granted_usage ADD CONSTRAINT granted_usage_pkey PRIMARY KEY (customer_id, metric, quota_window, window_start);
ALTER TABLE granted_usage ADD CONSTRAINT granted_usage_quota_window_check CHECK ((quota_window = ANY (ARRAY['day'::text, 'week'::text, 'month'::text])));
CREATE UNIQUE INDEX granted_usage_pkey ON granted_usage USING btree (customer_id, metric, quota_window, window_start);
CREATE INDEX granted_usage_window_start ON granted_usage USING btree (window_start);

CREATE TABLE grants (
    id text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    amount bigint NOT NULL,
    remaining bigint NOT NULL,
    priority integer NOT NULL DEFAULT 0,
    expires_at timestamp with time zone,
    reason text NOT NULL DEFAULT ''::text,
    request_id text,
    created_at timestamp with time zone NOT NULL,
    voided_at timestamp with time zone,
    exhausted_at timestamp with time zone
);
ALTER TABLE grants ADD CONSTRAINT grants_amount_check CHECK (((amount >= 1) AND (amount <= '9007199254740991'::bigint)));
ALTER TABLE grants ADD CONSTRAINT grants_check CHECK (((remaining >= 0) AND (remaining <= amount)));
ALTER TABLE grants ADD CONSTRAINT grants_check1 CHECK ((expires_at > created_at));
ALTER TABLE grants ADD CONSTRAINT grants_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers(id) ON DELETE CASCADE;
ALTER TABLE grants ADD CONSTRAINT grants_id_check CHECK ((id ~ '^grt_[A-Za-z0-9]{16,64}$'::text));
ALTER TABLE grants ADD CONSTRAINT grants_metric_fkey FOREIGN KEY (metric) REFERENCES metrics(key) ON DELETE CASCADE;
ALTER TABLE grants ADD CONSTRAINT grants_pkey PRIMARY KEY (id);
ALTER TABLE grants ADD CONSTRAINT grants_priority_check CHECK (((priority >= 0) AND (priority <= 1000)));
ALTER TABLE grants ADD CONSTRAINT grants_reason_check CHECK ((char_length(reason) <= 500));
ALTER TABLE grants ADD CONSTRAINT grants_request_once UNIQUE (customer_id, request_id);
CREATE INDEX grants_live ON grants USING btree (customer_id, metric, priority, expires_at) WHERE ((remaining > 0) AND (voided_at IS NULL));
CREATE UNIQUE INDEX grants_pkey ON grants USING btree (id);
CREATE UNIQUE INDEX grants_request_once ON grants USING btree (customer_id, request_id);

CREATE TABLE lease_holders (
    holder bigint NOT NULL,
    started_at timestamp with time zone NOT NULL DEFAULT now(),
    gone_since timestamp with time zone
);
ALTER TABLE lease_holders ADD CONSTRAINT lease_holders_pkey PRIMARY KEY (holder);
CREATE UNIQUE INDEX lease_holders_pkey ON lease_holders USING btree (holder);

CREATE TABLE metric_capacities (
    metric text COLLATE "C" NOT NULL,
    quota_window text NOT NULL,
    capacity bigint NOT NULL
);
ALTER TABLE metric_capacities ADD CONSTRAINT metric_capacities_capacity_check CHECK (((capacity >= 0) AND (capacity <= '9007199254740991'::bigint)));
ALTER TABLE metric_capacities ADD CONSTRAINT metric_capacities_metric_fkey FOREIGN KEY (metric) REFERENCES metrics(key) ON DELETE CASCADE;
ALTER TABLE metric_capacities ADD CONSTRAINT metric_capacities_pkey PRIMARY KEY (metric, quota_window);
ALTER TABLE metric_capacities ADD CONSTRAINT metric_capacities_quota_window_check CHECK ((quota_window = ANY (ARRAY['second'::text, 'minute'::text, 'hour'::text, 'day'::text, 'week'::text, 'month'::text])));
CREATE UNIQUE INDEX metric_capacities_pkey ON metric_capacities USING btree (metric, quota_window);

CREATE TABLE metric_usage (
    metric text COLLATE "C" NOT NULL,
    quota_window text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    shard smallint NOT NULL,
    used bigint NOT NULL
);
ALTER TABLE metric_usage ADD CONSTRAINT metric_usage_metric_fkey FOREIGN KEY (metric) REFERENCES metrics(key) ON DELETE CASCADE;
ALTER TABLE metric_usage ADD CONSTRAINT metric_usage_pkey PRIMARY KEY (metric, quota_window, window_start, shard);
ALTER TABLE metric_usage ADD CONSTRAINT metric_usage_quota_window_check CHECK ((quota_window = ANY (ARRAY['hour'::text, 'day'::text, 'week'::text, 'month'::text])));
ALTER TABLE metric_usage ADD CONSTRAINT metric_usage_shard_check CHECK (((shard >= 0) AND (shard <= 63)));
CREATE UNIQUE INDEX metric_usage_pkey ON metric_usage USING btree (metric, quota_window, window_start, shard);

CREATE TABLE metrics (
    key text COLLATE "C" NOT NULL,
    description text NOT NULL DEFAULT ''::text,
    version bigint NOT NULL DEFAULT 1,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL
);
ALTER TABLE metrics ADD CONSTRAINT metrics_key_check CHECK ((key ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'::text));
ALTER TABLE metrics ADD CONSTRAINT metrics_pkey PRIMARY KEY (key);
ALTER TABLE metrics ADD CONSTRAINT metrics_version_check CHECK ((version >= 1));
CREATE UNIQUE INDEX metrics_pkey ON metrics USING btree (key);

CREATE TABLE object_counts (
    kind text COLLATE "C" NOT NULL,
    n bigint NOT NULL
);
ALTER TABLE object_counts ADD CONSTRAINT object_counts_n_check CHECK ((n >= 0));
ALTER TABLE object_counts ADD CONSTRAINT object_counts_pkey PRIMARY KEY (kind);
CREATE UNIQUE INDEX object_counts_pkey ON object_counts USING btree (kind);

CREATE TABLE overrides (
    customer_id text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    quota_window text NOT NULL,
    limit_value bigint NOT NULL,
    mode text NOT NULL,
    overage_percent integer NOT NULL DEFAULT 0,
    overage_price_micros bigint,
    ceiling bigint,
    expires_at timestamp with time zone,
    reason text NOT NULL DEFAULT ''::text,
    version bigint NOT NULL DEFAULT 1,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    algorithm text,
    burst bigint,
    per text COLLATE "C" NOT NULL DEFAULT 'customer'::text,
    rollover_max bigint
);
ALTER TABLE overrides ADD CONSTRAINT overrides_algorithm_check CHECK ((algorithm = ANY (ARRAY['sliding_window'::text, 'fixed_window'::text, 'sliding_log'::text, 'token_bucket'::text])));
ALTER TABLE overrides ADD CONSTRAINT overrides_algorithm_short_only CHECK (((algorithm IS NULL) OR (quota_window = ANY (ARRAY['second'::text, 'minute'::text]))));
ALTER TABLE overrides ADD CONSTRAINT overrides_burst_check CHECK (((burst >= 1) AND (burst <= '9007199254740991'::bigint)));
ALTER TABLE overrides ADD CONSTRAINT overrides_burst_token_bucket_only CHECK (((burst IS NULL) OR (NOT (algorithm IS DISTINCT FROM 'token_bucket'::text))));
ALTER TABLE overrides ADD CONSTRAINT overrides_ceiling_check CHECK ((ceiling <= '9007199254740991'::bigint));
ALTER TABLE overrides ADD CONSTRAINT overrides_ceiling_elastic_only CHECK (((ceiling IS NULL) OR ((mode = 'elastic'::text) AND (ceiling >= limit_value))));
ALTER TABLE overrides ADD CONSTRAINT overrides_check CHECK (((rollover_max IS NULL) OR (((rollover_max >= 1) AND (rollover_max <= '9007199254740991'::bigint)) AND (mode = 'hard'::text) AND (quota_window = ANY (ARRAY['day'::text, 'week'::text, 'month'::text])))));
ALTER TABLE overrides ADD CONSTRAINT overrides_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers(id) ON DELETE CASCADE;
ALTER TABLE overrides ADD CONSTRAINT overrides_limit_value_check CHECK (((limit_value >= 0) AND (limit_value <= '9007199254740991'::bigint)));
ALTER TABLE overrides ADD CONSTRAINT overrides_metric_fkey FOREIGN KEY (metric) REFERENCES metrics(key) ON DELETE RESTRICT;
ALTER TABLE overrides ADD CONSTRAINT overrides_mode_check CHECK ((mode = ANY (ARRAY['hard'::text, 'soft'::text, 'elastic'::text])));
ALTER TABLE overrides ADD CONSTRAINT overrides_overage_percent_check CHECK (((overage_percent >= 0) AND (overage_percent <= 1000)));
ALTER TABLE overrides ADD CONSTRAINT overrides_overage_price_micros_check CHECK (((overage_price_micros >= 0) AND (overage_price_micros <= '9007199254740991'::bigint)));
ALTER TABLE overrides ADD CONSTRAINT overrides_overage_soft_only CHECK (((mode = 'soft'::text) OR ((overage_percent = 0) AND (overage_price_micros IS NULL))));
ALTER TABLE overrides ADD CONSTRAINT overrides_per_check CHECK ((per = ANY (ARRAY['customer'::text, 'subject'::text])));
ALTER TABLE overrides ADD CONSTRAINT overrides_pkey PRIMARY KEY (customer_id, metric, quota_window, per);
ALTER TABLE overrides ADD CONSTRAINT overrides_quota_window_check CHECK ((quota_window = ANY (ARRAY['second'::text, 'minute'::text, 'hour'::text, 'day'::text, 'week'::text, 'month'::text, 'total'::text])));
ALTER TABLE overrides ADD CONSTRAINT overrides_sliding_log_bounded CHECK (((algorithm IS DISTINCT FROM 'sliding_log'::text) OR (limit_value <= 10000)));
ALTER TABLE overrides ADD CONSTRAINT overrides_total_hard_only CHECK (((quota_window <> 'total'::text) OR (mode = 'hard'::text)));
ALTER TABLE overrides ADD CONSTRAINT overrides_version_check CHECK ((version >= 1));
CREATE INDEX overrides_metric ON overrides USING btree (metric);
CREATE UNIQUE INDEX overrides_pkey ON overrides USING btree (customer_id, metric, quota_window, per);

CREATE TABLE plan_assignments (
    id bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    customer_id text COLLATE "C" NOT NULL,
    valid_from timestamp with time zone NOT NULL,
    valid_to timestamp with time zone,
    plan_key text COLLATE "C" NOT NULL,
    plan_name text NOT NULL,
    price_amount_cents bigint NOT NULL,
    price_currency text NOT NULL,
    price_interval text NOT NULL,
    overage_prices jsonb NOT NULL DEFAULT '{}'::jsonb,
    billing_anchor_day smallint,
    time_zone text NOT NULL DEFAULT 'UTC'::text
);
ALTER TABLE plan_assignments ADD CONSTRAINT plan_assignments_billing_anchor_day_check CHECK (((billing_anchor_day >= 1) AND (billing_anchor_day <= 28)));
ALTER TABLE plan_assignments ADD CONSTRAINT plan_assignments_ordered CHECK (((valid_to IS NULL) OR (valid_to >= valid_from)));
ALTER TABLE plan_assignments ADD CONSTRAINT plan_assignments_overage_prices_check CHECK ((jsonb_typeof(overage_prices) = 'object'::text));
ALTER TABLE plan_assignments ADD CONSTRAINT plan_assignments_pkey PRIMARY KEY (id);
ALTER TABLE plan_assignments ADD CONSTRAINT plan_assignments_price_amount_cents_check CHECK (((price_amount_cents >= 0) AND (price_amount_cents <= '9007199254740991'::bigint)));
ALTER TABLE plan_assignments ADD CONSTRAINT plan_assignments_price_currency_check CHECK ((price_currency ~ '^[A-Z]{3}$'::text));
ALTER TABLE plan_assignments ADD CONSTRAINT plan_assignments_price_interval_check CHECK ((price_interval = ANY (ARRAY['day'::text, 'week'::text, 'month'::text, 'year'::text])));
ALTER TABLE plan_assignments ADD CONSTRAINT plan_assignments_time_zone_check CHECK ((time_zone <> ''::text));
CREATE INDEX plan_assignments_customer ON plan_assignments USING btree (customer_id, valid_from);
CREATE UNIQUE INDEX plan_assignments_open ON plan_assignments USING btree (customer_id) WHERE (valid_to IS NULL);
CREATE INDEX plan_assignments_open_plan ON plan_assignments USING btree (plan_key) WHERE (valid_to IS NULL);
CREATE UNIQUE INDEX plan_assignments_pkey ON plan_assignments USING btree (id);

CREATE TABLE plan_limits (
    plan_key text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    quota_window text NOT NULL,
    position smallint NOT NULL,
    limit_value bigint NOT NULL,
    mode text NOT NULL,
    overage_percent integer NOT NULL DEFAULT 0,
    overage_price_micros bigint,
    ceiling bigint,
    algorithm text,
    burst bigint,
    per text COLLATE "C" NOT NULL DEFAULT 'customer'::text,
    rollover_max bigint
);
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_algorithm_check CHECK ((algorithm = ANY (ARRAY['sliding_window'::text, 'fixed_window'::text, 'sliding_log'::text, 'token_bucket'::text])));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_algorithm_short_only CHECK (((algorithm IS NULL) OR (quota_window = ANY (ARRAY['second'::text, 'minute'::text]))));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_burst_check CHECK (((burst >= 1) AND (burst <= '9007199254740991'::bigint)));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_burst_token_bucket_only CHECK (((burst IS NULL) OR (NOT (algorithm IS DISTINCT FROM 'token_bucket'::text))));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_ceiling_check CHECK ((ceiling <= '9007199254740991'::bigint));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_ceiling_elastic_only CHECK (((ceiling IS NULL) OR ((mode = 'elastic'::text) AND (ceiling >= limit_value))));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_check CHECK (((rollover_max IS NULL) OR (((rollover_max >= 1) AND (rollover_max <= '9007199254740991'::bigint)) AND (mode = 'hard'::text) AND (quota_window = ANY (ARRAY['day'::text, 'week'::text, 'month'::text])))));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_limit_value_check CHECK (((limit_value >= 0) AND (limit_value <= '9007199254740991'::bigint)));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_metric_fkey FOREIGN KEY (metric) REFERENCES metrics(key) ON DELETE RESTRICT;
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_mode_check CHECK ((mode = ANY (ARRAY['hard'::text, 'soft'::text, 'elastic'::text])));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_overage_percent_check CHECK (((overage_percent >= 0) AND (overage_percent <= 1000)));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_overage_price_micros_check CHECK (((overage_price_micros >= 0) AND (overage_price_micros <= '9007199254740991'::bigint)));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_overage_soft_only CHECK (((mode = 'soft'::text) OR ((overage_percent = 0) AND (overage_price_micros IS NULL))));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_per_check CHECK ((per = ANY (ARRAY['customer'::text, 'subject'::text])));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_pkey PRIMARY KEY (plan_key, metric, quota_window, per);
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_plan_key_fkey FOREIGN KEY (plan_key) REFERENCES plans(key) ON DELETE CASCADE;
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_position_check CHECK (("position" >= 0));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_quota_window_check CHECK ((quota_window = ANY (ARRAY['second'::text, 'minute'::text, 'hour'::text, 'day'::text, 'week'::text, 'month'::text, 'total'::text])));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_sliding_log_bounded CHECK (((algorithm IS DISTINCT FROM 'sliding_log'::text) OR (limit_value <= 10000)));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_total_hard_only CHECK (((quota_window <> 'total'::text) OR (mode = 'hard'::text)));
CREATE UNIQUE INDEX plan_limits_pkey ON plan_limits USING btree (plan_key, metric, quota_window, per);

CREATE TABLE plan_versions (
    plan_key text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    price_amount_cents bigint NOT NULL,
    price_currency text NOT NULL,
    price_interval text NOT NULL,
    limits jsonb NOT NULL,
    features jsonb NOT NULL,
    customers_on bigint NOT NULL,
    created_at timestamp with time zone NOT NULL
);
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_customers_on FOREIGN KEY (plan_key, customers_on) REFERENCES plan_versions(plan_key, version);
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_features_check CHECK ((jsonb_typeof(features) = 'object'::text));
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_limits_check CHECK ((jsonb_typeof(limits) = 'array'::text));
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_pkey PRIMARY KEY (plan_key, version);
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_plan_key_fkey FOREIGN KEY (plan_key) REFERENCES plans(key) ON DELETE CASCADE;
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_price_amount_cents_check CHECK (((price_amount_cents >= 0) AND (price_amount_cents <= '9007199254740991'::bigint)));
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_price_currency_check CHECK ((price_currency ~ '^[A-Z]{3}$'::text));
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_price_interval_check CHECK ((price_interval = ANY (ARRAY['day'::text, 'week'::text, 'month'::text, 'year'::text])));
ALTER TABLE plan_versions ADD CONSTRAINT plan_versions_version_check CHECK ((version >= 1));
CREATE UNIQUE INDEX plan_versions_pkey ON plan_versions USING btree (plan_key, version);

CREATE TABLE plans (
    key text COLLATE "C" NOT NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT ''::text,
    price_amount_cents bigint NOT NULL DEFAULT 0,
    price_currency text NOT NULL DEFAULT 'USD'::text,
    price_interval text NOT NULL DEFAULT 'month'::text,
    version bigint NOT NULL DEFAULT 1,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    features jsonb NOT NULL DEFAULT '{}'::jsonb,
    latest_version bigint NOT NULL DEFAULT 1,
    public boolean NOT NULL DEFAULT false
);
ALTER TABLE plans ADD CONSTRAINT plans_features_check CHECK ((jsonb_typeof(features) = 'object'::text));
ALTER TABLE plans ADD CONSTRAINT plans_key_check CHECK ((key ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'::text));
ALTER TABLE plans ADD CONSTRAINT plans_latest_version_check CHECK ((latest_version >= 1));
ALTER TABLE plans ADD CONSTRAINT plans_pkey PRIMARY KEY (key);
ALTER TABLE plans ADD CONSTRAINT plans_price_amount_cents_check CHECK (((price_amount_cents >= 0) AND (price_amount_cents <= '9007199254740991'::bigint)));
ALTER TABLE plans ADD CONSTRAINT plans_price_currency_check CHECK ((price_currency ~ '^[A-Z]{3}$'::text));
ALTER TABLE plans ADD CONSTRAINT plans_price_interval_check CHECK ((price_interval = ANY (ARRAY['day'::text, 'week'::text, 'month'::text, 'year'::text])));
ALTER TABLE plans ADD CONSTRAINT plans_version_check CHECK ((version >= 1));
CREATE UNIQUE INDEX plans_pkey ON plans USING btree (key);

CREATE TABLE request_ids (
    customer_id text COLLATE "C" NOT NULL,
    kind text NOT NULL,
    request_id text NOT NULL,
    metric text NOT NULL,
    cost bigint NOT NULL,
    answer jsonb,
    created_at timestamp with time zone NOT NULL
);
ALTER TABLE request_ids ADD CONSTRAINT request_ids_cost_check CHECK ((cost > 0));
ALTER TABLE request_ids ADD CONSTRAINT request_ids_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers(id) ON DELETE CASCADE;
ALTER TABLE request_ids ADD CONSTRAINT request_ids_kind_check CHECK ((kind = ANY (ARRAY['check'::text, 'refund'::text])));
ALTER TABLE request_ids ADD CONSTRAINT request_ids_pkey PRIMARY KEY (customer_id, kind, request_id);
ALTER TABLE request_ids ADD CONSTRAINT request_ids_request_id_check CHECK (((length(request_id) >= 1) AND (length(request_id) <= 200)));
CREATE INDEX request_ids_created_at ON request_ids USING btree (created_at);
CREATE UNIQUE INDEX request_ids_pkey ON request_ids USING btree (customer_id, kind, request_id);

CREATE TABLE reservations (
    id text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    cost bigint NOT NULL,
    state text NOT NULL DEFAULT 'held'::text,
    committed bigint,
    over bigint NOT NULL DEFAULT 0,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    settled_at timestamp with time zone,
    request_id text,
    windows jsonb NOT NULL,
    answer jsonb NOT NULL,
    subject text NOT NULL DEFAULT ''::text
);
ALTER TABLE reservations ADD CONSTRAINT reservations_check CHECK (((state = 'committed'::text) = (committed IS NOT NULL)));
ALTER TABLE reservations ADD CONSTRAINT reservations_committed_check CHECK ((committed >= 0));
ALTER TABLE reservations ADD CONSTRAINT reservations_cost_check CHECK ((cost > 0));
ALTER TABLE reservations ADD CONSTRAINT reservations_over_check CHECK ((over >= 0));
ALTER TABLE reservations ADD CONSTRAINT reservations_pkey PRIMARY KEY (id);
ALTER TABLE reservations ADD CONSTRAINT reservations_state_check CHECK ((state = ANY (ARRAY['held'::text, 'committed'::text, 'released'::text, 'expired'::text])));
CREATE INDEX reservations_held_expiry ON reservations USING btree (expires_at) WHERE (state = 'held'::text);
CREATE UNIQUE INDEX reservations_pkey ON reservations USING btree (id);
CREATE UNIQUE INDEX reservations_request_id ON reservations USING btree (customer_id, request_id) WHERE (request_id IS NOT NULL);
CREATE INDEX reservations_settled ON reservations USING btree (settled_at) WHERE (state <> 'held'::text);

CREATE TABLE schema_migrations (
    version bigint NOT NULL,
    dirty boolean NOT NULL
);
ALTER TABLE schema_migrations ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);
CREATE UNIQUE INDEX schema_migrations_pkey ON schema_migrations USING btree (version);

CREATE TABLE stripe_meter_events (
    customer_id text NOT NULL,
    metric text NOT NULL,
    minute timestamp with time zone NOT NULL,
    stripe_customer text NOT NULL,
    value bigint NOT NULL,
    identifier text NOT NULL,
    status text NOT NULL DEFAULT 'pending'::text,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamp with time zone NOT NULL,
    last_status integer,
    last_error text NOT NULL DEFAULT ''::text,
    created_at timestamp with time zone NOT NULL
);
ALTER TABLE stripe_meter_events ADD CONSTRAINT stripe_meter_events_identifier_key UNIQUE (identifier);
ALTER TABLE stripe_meter_events ADD CONSTRAINT stripe_meter_events_pkey PRIMARY KEY (customer_id, metric, minute);
ALTER TABLE stripe_meter_events ADD CONSTRAINT stripe_meter_events_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'failed'::text])));
ALTER TABLE stripe_meter_events ADD CONSTRAINT stripe_meter_events_value_check CHECK ((value > 0));
CREATE INDEX stripe_meter_events_due ON stripe_meter_events USING btree (next_attempt_at) WHERE (status = 'pending'::text);
CREATE UNIQUE INDEX stripe_meter_events_identifier_key ON stripe_meter_events USING btree (identifier);
CREATE UNIQUE INDEX stripe_meter_events_pkey ON stripe_meter_events USING btree (customer_id, metric, minute);

CREATE TABLE stripe_usage_pending (
    customer_id text NOT NULL,
    metric text NOT NULL,
    value bigint NOT NULL
);
ALTER TABLE stripe_usage_pending ADD CONSTRAINT stripe_usage_pending_pkey PRIMARY KEY (customer_id, metric);
CREATE UNIQUE INDEX stripe_usage_pending_pkey ON stripe_usage_pending USING btree (customer_id, metric);

CREATE TABLE usage_counters (
    customer_id text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    quota_window text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    used bigint NOT NULL,
    watched boolean NOT NULL DEFAULT false,
    subject text COLLATE "C" NOT NULL DEFAULT ''::text
);
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers(id) ON DELETE CASCADE;
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_metric_fkey FOREIGN KEY (metric) REFERENCES metrics(key) ON DELETE CASCADE;
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_pkey PRIMARY KEY (customer_id, metric, subject, quota_window, window_start);
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_quota_window_check CHECK ((quota_window = ANY (ARRAY['hour'::text, 'day'::text, 'week'::text, 'month'::text, 'total'::text])));
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_total_from_epoch CHECK (((quota_window <> 'total'::text) OR (window_start = '1970-01-01 00:00:00+00'::timestamp with time zone)));
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_used_check CHECK (((used >= 0) AND (used <= '9007199254740991'::bigint)));
CREATE UNIQUE INDEX usage_counters_pkey ON usage_counters USING btree (customer_id, metric, subject, quota_window, window_start);
CREATE INDEX usage_counters_window_start ON usage_counters USING btree (window_start, customer_id, metric, subject, quota_window);

CREATE TABLE usage_events (
    id bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    type text NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    quota_window text,
    window_start timestamp with time zone,
    window_end timestamp with time zone,
    threshold integer NOT NULL,
    limit_value bigint NOT NULL,
    used bigint NOT NULL,
    occurred_at timestamp with time zone NOT NULL,
    grant_id text COLLATE "C",
    plan_key text COLLATE "C",
    next_plan_key text COLLATE "C"
);
ALTER TABLE usage_events ADD CONSTRAINT usage_events_check CHECK ((window_end > window_start));
ALTER TABLE usage_events ADD CONSTRAINT usage_events_grant_check CHECK (
CASE type
    WHEN 'grant.exhausted'::text THEN ((grant_id IS NOT NULL) AND (quota_window IS NULL) AND (window_start IS NULL) AND (window_end IS NULL))
    WHEN 'trial.ended'::text THEN ((grant_id IS NULL) AND (quota_window IS NULL) AND (window_start IS NULL) AND (window_end IS NULL))
    ELSE ((grant_id IS NULL) AND (quota_window IS NOT NULL) AND (window_start IS NOT NULL) AND (window_end IS NOT NULL))
END);
ALTER TABLE usage_events ADD CONSTRAINT usage_events_limit_value_check CHECK (((limit_value >= 0) AND (limit_value <= '9007199254740991'::bigint)));
ALTER TABLE usage_events ADD CONSTRAINT usage_events_once UNIQUE (customer_id, metric, quota_window, window_start, type, threshold);
ALTER TABLE usage_events ADD CONSTRAINT usage_events_pkey PRIMARY KEY (id);
ALTER TABLE usage_events ADD CONSTRAINT usage_events_plan_check CHECK (((type = 'trial.ended'::text) = ((plan_key IS NOT NULL) AND (next_plan_key IS NOT NULL))));
ALTER TABLE usage_events ADD CONSTRAINT usage_events_quota_window_check CHECK ((quota_window = ANY (ARRAY['hour'::text, 'day'::text, 'week'::text, 'month'::text, 'total'::text])));
ALTER TABLE usage_events ADD CONSTRAINT usage_events_threshold_check CHECK (((threshold >= 0) AND (threshold <= 1000)));
ALTER TABLE usage_events ADD CONSTRAINT usage_events_type_check CHECK ((type = ANY (ARRAY['usage.threshold'::text, 'usage.overage_started'::text, 'usage.limit_reached'::text, 'grant.exhausted'::text, 'trial.ended'::text])));
ALTER TABLE usage_events ADD CONSTRAINT usage_events_used_check CHECK (((used >= 0) AND (used <= '9007199254740991'::bigint)));
CREATE INDEX usage_events_grant_occurred ON usage_events USING btree (occurred_at) WHERE (grant_id IS NOT NULL);
CREATE UNIQUE INDEX usage_events_grant_once ON usage_events USING btree (grant_id) WHERE (grant_id IS NOT NULL);
CREATE UNIQUE INDEX usage_events_once ON usage_events USING btree (customer_id, metric, quota_window, window_start, type, threshold);
CREATE UNIQUE INDEX usage_events_pkey ON usage_events USING btree (id);
CREATE INDEX usage_events_trial_occurred ON usage_events USING btree (occurred_at) WHERE (type = 'trial.ended'::text);
CREATE UNIQUE INDEX usage_events_trial_once ON usage_events USING btree (customer_id, occurred_at) WHERE (type = 'trial.ended'::text);
CREATE INDEX usage_events_window_end ON usage_events USING btree (window_end);

CREATE TABLE usage_history (
    customer_id text COLLATE "C" NOT NULL,
    metric text COLLATE "C" NOT NULL,
    day date NOT NULL,
    used bigint NOT NULL DEFAULT 0,
    overage bigint NOT NULL DEFAULT 0,
    denied bigint NOT NULL DEFAULT 0
);
ALTER TABLE usage_history ADD CONSTRAINT usage_history_denied_check CHECK ((denied >= 0));
ALTER TABLE usage_history ADD CONSTRAINT usage_history_overage_check CHECK ((overage >= 0));
ALTER TABLE usage_history ADD CONSTRAINT usage_history_pkey PRIMARY KEY (customer_id, day, metric);
ALTER TABLE usage_history ADD CONSTRAINT usage_history_used_check CHECK ((used >= 0));
CREATE INDEX usage_history_day ON usage_history USING btree (day);
CREATE UNIQUE INDEX usage_history_pkey ON usage_history USING btree (customer_id, day, metric);

CREATE TABLE webhook_deliveries (
    id bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    webhook_id text COLLATE "C" NOT NULL,
    event_id bigint NOT NULL,
    status text NOT NULL DEFAULT 'pending'::text,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamp with time zone NOT NULL,
    last_attempt_at timestamp with time zone,
    last_status integer,
    last_error text NOT NULL DEFAULT ''::text,
    created_at timestamp with time zone NOT NULL,
    delivered_at timestamp with time zone
);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_attempts_check CHECK ((attempts >= 0));
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES usage_events(id) ON DELETE CASCADE;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_once UNIQUE (webhook_id, event_id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text])));
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES webhooks(id) ON DELETE CASCADE;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries USING btree (next_attempt_at) WHERE (status = 'pending'::text);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries USING btree (event_id);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries USING btree (last_attempt_at) WHERE (status <> 'pending'::text);
CREATE UNIQUE INDEX webhook_deliveries_once ON webhook_deliveries USING btree (webhook_id, event_id);
CREATE UNIQUE INDEX webhook_deliveries_pkey ON webhook_deliveries USING btree (id);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries USING btree (webhook_id, id DESC);

CREATE TABLE webhooks (
    id text COLLATE "C" NOT NULL,
    url text NOT NULL,
    events text[] NOT NULL,
    thresholds integer[] NOT NULL,
    secret text NOT NULL,
    version bigint NOT NULL DEFAULT 1,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL
);
ALTER TABLE webhooks ADD CONSTRAINT webhooks_events_check CHECK ((events <@ ARRAY['usage.threshold'::text, 'usage.overage_started'::text, 'usage.limit_reached'::text, 'grant.exhausted'::text, 'trial.ended'::text]));
ALTER TABLE webhooks ADD CONSTRAINT webhooks_id_check CHECK ((id ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'::text));
ALTER TABLE webhooks ADD CONSTRAINT webhooks_pkey PRIMARY KEY (id);
ALTER TABLE webhooks ADD CONSTRAINT webhooks_secret_check CHECK ((secret ~ '^whsec_'::text));
ALTER TABLE webhooks ADD CONSTRAINT webhooks_thresholds_check CHECK (((1 <= ALL (thresholds)) AND (1000 >= ALL (thresholds))));
ALTER TABLE webhooks ADD CONSTRAINT webhooks_url_check CHECK ((url ~ '^https?://'::text));
ALTER TABLE webhooks ADD CONSTRAINT webhooks_version_check CHECK ((version >= 1));
CREATE UNIQUE INDEX webhooks_pkey ON webhooks USING btree (id);
CREATE TRIGGER webhooks_count AFTER INSERT OR DELETE ON webhooks FOR EACH ROW EXECUTE FUNCTION quotad_count_objects();
CREATE TRIGGER webhooks_truncate AFTER TRUNCATE ON webhooks FOR EACH STATEMENT EXECUTE FUNCTION quotad_count_objects();

CREATE SEQUENCE audit_events_id_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;
CREATE SEQUENCE grant_draws_id_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;
CREATE SEQUENCE plan_assignments_id_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;
CREATE SEQUENCE usage_events_id_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;
CREATE SEQUENCE webhook_deliveries_id_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;

CREATE VIEW quotad_live_leases AS
 SELECT l.customer_id,
    l.metric,
    l.subject,
    l.quota_window,
    l.window_start,
    l.holder,
    l.unused
   FROM counter_leases l
  WHERE (((l.holder & '4294967295'::bigint))::oid = ANY (( SELECT quotad_live_holders() AS quotad_live_holders)::oid[]));

CREATE OR REPLACE FUNCTION quotad_add_global(p_metrics text[], p_windows text[], p_starts timestamp with time zone[], p_units bigint[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;
COMMENT ON FUNCTION quotad_add_global(text[],text[],timestamp with time zone[],bigint[]) IS 'Adds units to metrics'' global usage, summed by window, the windows in the order of locks (metric, window_rank, start), after the counters: the lease calls and the ledger''s charges and give-backs count global usage through it.';

CREATE OR REPLACE FUNCTION quotad_count_global(p_metric text, p_window text, p_start timestamp with time zone, p_units bigint)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;
COMMENT ON FUNCTION quotad_count_global(text,text,timestamp with time zone,bigint) IS 'Adds p_units to a metric''s global usage in one window (metric_usage), or takes them off when negative: from the fullest shard first, never below zero, the window''s shards locked in shard order.';

CREATE OR REPLACE FUNCTION quotad_count_objects()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE object_counts
    SET n = CASE TG_OP WHEN 'INSERT' THEN n + 1 WHEN 'DELETE' THEN n - 1 ELSE 0 END
    WHERE kind = TG_TABLE_NAME;
    RETURN NULL;
END
$function$;
COMMENT ON FUNCTION quotad_count_objects() IS 'The trigger that keeps object_counts: the rows of the table it is on (customers, webhooks), by its name, in the writing transaction, so that the caps on them are checked without counting a table.';

CREATE OR REPLACE FUNCTION quotad_freed(p_customer text, p_metric text, p_subject text, p_window text, p_start timestamp with time zone, p_channel text, p_payload text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE usage_counters c SET watched = false
    WHERE c.customer_id = p_customer AND c.metric = p_metric AND c.subject = p_subject
      AND c.quota_window = p_window AND c.window_start = p_start AND c.watched;
    IF FOUND THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
END
$function$;
COMMENT ON FUNCTION quotad_freed(text,text,text,text,timestamp with time zone,text,text) IS 'Clears a counter''s watched mark and, if it was set, tells every process (p_payload on p_channel) that units came back to it: every call that gives units back calls it once they are back.';

CREATE OR REPLACE FUNCTION quotad_holder_alive(p_holder bigint)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT EXISTS (SELECT 1 FROM quotad_holder_sessions() k WHERE k.o_holder = (p_holder & 4294967295)::oid)
$function$;
COMMENT ON FUNCTION quotad_holder_alive(bigint) IS 'Whether holder p_holder runs (quotad_holder_sessions): a holder that does not is dead, and its leases may be reclaimed.';

CREATE OR REPLACE FUNCTION quotad_holder_sessions()
 RETURNS TABLE(o_holder oid, o_pid integer)
 LANGUAGE sql
 STABLE
AS $function$
    SELECT k.objid, k.pid FROM pg_locks k
    WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
      AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
      AND k.classid = (quotad_lock_class()::bigint & 4294967295)::oid
$function$;
COMMENT ON FUNCTION quotad_holder_sessions() IS 'The rule of who runs: a process runs while it holds, on a session of its own, the advisory lock (quotad_lock_class(), its holder key), which PostgreSQL releases when the process or its connection dies. One row per running holder: its key as an oid (a holder bigint h is (h & 4294967295)::oid) and the backend that holds the lock.';

CREATE OR REPLACE FUNCTION quotad_lease_all(p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamp with time zone[], p_holder bigint, p_seqs bigint[], p_bounds bigint[], p_needs bigint[], p_extras bigint[], p_inflights bigint[], p_helds boolean[], p_global_starts timestamp with time zone[], p_channel text, p_payloads text[])
 RETURNS TABLE(o_i integer, o_granted bigint, o_used bigint, o_others bigint, o_lost boolean, o_gone boolean)
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
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
$function$;
COMMENT ON FUNCTION quotad_lease_all(text[],text[],text[],text[],timestamp with time zone[],bigint,bigint[],bigint[],bigint[],bigint[],bigint[],boolean[],timestamp with time zone[],text,text[]) IS 'Grants, for each i, counter i (p_customers[i], p_metrics[i], p_subjects[i], p_windows[i] from p_starts[i]) to holder p_holder in its call p_seqs[i]: p_needs[i] units all or none and up to p_extras[i] more to hold, within p_bounds[i]; the lease then reports p_inflights[i] units in flight besides. p_helds[i]: the caller believes it holds a lease there (none held: o_lost, nothing granted). p_global_starts[i]: the granted units count in the metric''s global usage too. One row per counter: what was granted, the counter after, the units other live holders hold unused, o_lost, and o_gone (the customer or metric was deleted). When nothing is granted, the other live holders are asked for their units (p_payloads[i] on p_channel, unless null), or, when none holds any, the counter is marked watched.';

CREATE OR REPLACE FUNCTION quotad_live_holders()
 RETURNS oid[]
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    RETURN ARRAY(SELECT k.o_holder FROM quotad_holder_sessions() k);
END
$function$;
COMMENT ON FUNCTION quotad_live_holders() IS 'The keys of the running holders (quotad_holder_sessions), read once per statement: the view quotad_live_leases, quotad_lease_all and the list of holders compare leases'' holders with it.';

CREATE OR REPLACE FUNCTION quotad_lock_class()
 RETURNS integer
 LANGUAGE sql
 STABLE
AS $function$
    SELECT hashtext('quotad:' || current_schema())
$function$;
COMMENT ON FUNCTION quotad_lock_class() IS 'The first key of every holder''s advisory lock: this schema''s, so that the processes of two schemas of one database do not see each other.';

CREATE OR REPLACE FUNCTION quotad_others_alive(p_holder bigint)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT EXISTS (SELECT 1 FROM quotad_holder_sessions() k WHERE k.o_holder <> (p_holder & 4294967295)::oid)
$function$;
COMMENT ON FUNCTION quotad_others_alive(bigint) IS 'Whether any holder other than p_holder runs on this schema (quotad_holder_sessions): when none does, no lease of another process can be recalled.';

CREATE OR REPLACE FUNCTION quotad_recall(p_customer text, p_metric text, p_subject text, p_window text, p_start timestamp with time zone, p_holder bigint, p_channel text, p_payload text)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
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
$function$;
COMMENT ON FUNCTION quotad_recall(text,text,text,text,timestamp with time zone,bigint,text,text) IS 'Asks the other live holders whose leases of a counter hold units unused to settle them (p_payload on p_channel, when there is any such lease), and returns how many such leases there are.';

CREATE OR REPLACE FUNCTION quotad_report(p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamp with time zone[], p_holder bigint, p_seqs bigint[], p_unused bigint[], p_channel text, p_payloads text[])
 RETURNS SETOF integer
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
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
$function$;
COMMENT ON FUNCTION quotad_report(text[],text[],text[],text[],timestamp with time zone[],bigint,bigint[],bigint[],text,text[]) IS 'Records, in call p_seqs[i], that p_holder holds p_unused[i] units unused in its lease of counter i, and returns the positions (from 1) of the leases the store no longer holds. A lease reported to hold more than before makes units recallable: a watched counter is told (quotad_freed).';

CREATE OR REPLACE FUNCTION quotad_resolve(p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamp with time zone[], p_holder bigint, p_seqs bigint[])
 RETURNS TABLE(o_i integer, o_applied boolean, o_held boolean, o_unused bigint, o_granted bigint)
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
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
$function$;
COMMENT ON FUNCTION quotad_resolve(text[],text[],text[],text[],timestamp with time zone[],bigint,bigint[]) IS 'Tells p_holder whether its call p_seqs[i] on its lease of counter i, whose answer it never got, was applied, and fences off one that was not: a copy arriving later changes nothing, and asked again it answers the same. One row per counter: whether the call was applied, and the lease as the store holds it now (held, unused units, and what the call granted if it was an applied grant).';

CREATE OR REPLACE FUNCTION quotad_settle_all(p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamp with time zone[], p_holder bigint, p_seqs bigint[], p_unused bigint[], p_global_starts timestamp with time zone[], p_channel text, p_payloads text[])
 RETURNS void
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
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
$function$;
COMMENT ON FUNCTION quotad_settle_all(text[],text[],text[],text[],timestamp with time zone[],bigint,bigint[],bigint[],timestamp with time zone[],text,text[]) IS 'Ends p_holder''s leases of counters i in its calls p_seqs[i]: the p_unused[i] units each held unused come off the counter (and off the metric''s global usage where p_global_starts[i]). A lease the store no longer holds (a reset ended it, with its units), or one a later call already decided, gives nothing back. Where units came back to a watched counter, p_payloads[i] goes out on p_channel.';

CREATE OR REPLACE FUNCTION quotad_window_rank(p_window text)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT CASE WHEN window_rank(p_window) > 2 THEN window_rank(p_window) - 2 END
$function$;
COMMENT ON FUNCTION quotad_window_rank(text) IS 'Kept for processes of schema 26 only: window_rank among the windows a counter may have (hour 1 ... total 5, null for others).';

CREATE OR REPLACE FUNCTION window_rank(w text)
 RETURNS smallint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
RETURN (array_position(ARRAY['second'::text, 'minute'::text, 'hour'::text, 'day'::text, 'week'::text, 'month'::text, 'total'::text], w))::smallint;
COMMENT ON FUNCTION window_rank(text) IS 'The rank of a window, shortest first (second 1 ... total 7), as tiers.Windows orders them: keyset pages of overrides compare with it, and every call locks counters (by customer, metric, subject, window, start) and then global usage (by metric, window, start) in its order of windows, so that none waits for another that waits for it.';
