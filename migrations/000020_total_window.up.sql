-- The window that never ends: "total", a gauge (seats, projects, a
-- lifetime allowance). Plans and overrides may limit it; its counter is
-- one row per customer, metric and subject, whose window_start is the Unix
-- epoch; it is never purged (see the purge's condition, which names the
-- calendar windows only), and leases serve it as they serve a month.
-- Metrics declare no capacity for it and it has no global usage: a total
-- is hard only (an overage or spare capacity needs a period).

ALTER TABLE plan_limits DROP CONSTRAINT plan_limits_quota_window_check,
    ADD CONSTRAINT plan_limits_quota_window_check
        CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month', 'total'));
ALTER TABLE plan_limits ADD CONSTRAINT plan_limits_total_hard_only CHECK (quota_window <> 'total' OR mode = 'hard');

ALTER TABLE overrides DROP CONSTRAINT overrides_quota_window_check,
    ADD CONSTRAINT overrides_quota_window_check
        CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month', 'total'));
ALTER TABLE overrides ADD CONSTRAINT overrides_total_hard_only CHECK (quota_window <> 'total' OR mode = 'hard');

ALTER TABLE usage_counters DROP CONSTRAINT usage_counters_quota_window_check,
    ADD CONSTRAINT usage_counters_quota_window_check
        CHECK (quota_window IN ('hour', 'day', 'week', 'month', 'total'));
-- A total has one counter, from the epoch.
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_total_from_epoch
    CHECK (quota_window <> 'total' OR window_start = '1970-01-01T00:00:00Z');

ALTER TABLE usage_events DROP CONSTRAINT usage_events_quota_window_check,
    ADD CONSTRAINT usage_events_quota_window_check
        CHECK (quota_window IN ('hour', 'day', 'week', 'month', 'total'));

-- Ranks, shortest first: a total after every calendar window, as
-- tiers.Windows orders them (keyset pages of overrides compare with it).
CREATE OR REPLACE FUNCTION window_rank(w text) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN array_position(ARRAY['second', 'minute', 'hour', 'day', 'week', 'month', 'total'], w)::smallint;

CREATE OR REPLACE FUNCTION quotad_window_rank(p_window text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_position(ARRAY['hour', 'day', 'week', 'month', 'total'], p_window)
$$;
