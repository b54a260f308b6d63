-- Down from the baseline is to nothing: it drops every object the
-- baseline made, with every row in them. There is no version before it to
-- go back to (see 000027_baseline.up.sql).

DROP VIEW quotad_live_leases;

DROP TABLE
    stripe_meter_events, stripe_usage_pending, webhook_deliveries, usage_events, webhooks, object_counts,
    audit_events, usage_history, granted_usage, grant_draws, grants, reservations, request_ids, metric_usage,
    lease_holders, counter_leases, usage_counters, api_keys, plan_assignments, feature_overrides, overrides,
    customers, plan_versions, plan_limits, plans, credit_rates, metric_capacities, metrics;

DROP FUNCTION
    quotad_count_objects(),
    quotad_resolve(text[], text[], text[], text[], timestamptz[], bigint, bigint[]),
    quotad_recall(text, text, text, text, timestamptz, bigint, text, text),
    quotad_freed(text, text, text, text, timestamptz, text, text),
    quotad_report(text[], text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], text, text[]),
    quotad_settle_all(text[], text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], timestamptz[], text, text[]),
    quotad_lease_all(text[], text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], bigint[], bigint[], bigint[],
                     boolean[], timestamptz[], text, text[]),
    quotad_add_global(text[], text[], timestamptz[], bigint[]),
    quotad_count_global(text, text, timestamptz, bigint),
    quotad_others_alive(bigint),
    quotad_holder_alive(bigint),
    quotad_live_holders(),
    quotad_holder_sessions(),
    quotad_lock_class(),
    quotad_window_rank(text),
    window_rank(text);
