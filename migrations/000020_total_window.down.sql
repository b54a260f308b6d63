-- Counts of totals, limits and overrides on them, and their events go with
-- the window.
DELETE FROM usage_events WHERE quota_window = 'total';
DELETE FROM usage_counters WHERE quota_window = 'total';
DELETE FROM overrides WHERE quota_window = 'total';
DELETE FROM plan_limits WHERE quota_window = 'total';

ALTER TABLE usage_events DROP CONSTRAINT usage_events_quota_window_check,
    ADD CONSTRAINT usage_events_quota_window_check CHECK (quota_window IN ('hour', 'day', 'week', 'month'));

ALTER TABLE usage_counters DROP CONSTRAINT usage_counters_total_from_epoch;
ALTER TABLE usage_counters DROP CONSTRAINT usage_counters_quota_window_check,
    ADD CONSTRAINT usage_counters_quota_window_check CHECK (quota_window IN ('hour', 'day', 'week', 'month'));

ALTER TABLE overrides DROP CONSTRAINT overrides_total_hard_only;
ALTER TABLE overrides DROP CONSTRAINT overrides_quota_window_check,
    ADD CONSTRAINT overrides_quota_window_check
        CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month'));

ALTER TABLE plan_limits DROP CONSTRAINT plan_limits_total_hard_only;
ALTER TABLE plan_limits DROP CONSTRAINT plan_limits_quota_window_check,
    ADD CONSTRAINT plan_limits_quota_window_check
        CHECK (quota_window IN ('second', 'minute', 'hour', 'day', 'week', 'month'));

CREATE OR REPLACE FUNCTION window_rank(w text) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN array_position(ARRAY['second', 'minute', 'hour', 'day', 'week', 'month'], w)::smallint;

CREATE OR REPLACE FUNCTION quotad_window_rank(p_window text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_position(ARRAY['hour', 'day', 'week', 'month'], p_window)
$$;
