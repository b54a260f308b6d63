-- Short-window limits fall back to the default algorithm (sliding_window)
-- and token buckets lose their burst.
ALTER TABLE overrides
    DROP CONSTRAINT overrides_sliding_log_bounded,
    DROP CONSTRAINT overrides_burst_token_bucket_only,
    DROP CONSTRAINT overrides_algorithm_short_only,
    DROP COLUMN burst,
    DROP COLUMN algorithm;

ALTER TABLE plan_limits
    DROP CONSTRAINT plan_limits_sliding_log_bounded,
    DROP CONSTRAINT plan_limits_burst_token_bucket_only,
    DROP CONSTRAINT plan_limits_algorithm_short_only,
    DROP COLUMN burst,
    DROP COLUMN algorithm;
