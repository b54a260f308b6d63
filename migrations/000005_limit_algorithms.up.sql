-- A short window's limit may name how it counts (its algorithm) and, for a
-- token bucket, the bucket's size (burst). NULL algorithm is the default
-- (sliding_window), NULL burst the limit. The constraints restate the rules
-- of internal/tiers, as in 000001.

ALTER TABLE plan_limits
    ADD COLUMN algorithm text
        CHECK (algorithm IN ('sliding_window', 'fixed_window', 'sliding_log', 'token_bucket')),
    ADD COLUMN burst bigint CHECK (burst BETWEEN 1 AND 9007199254740991),
    ADD CONSTRAINT plan_limits_algorithm_short_only
        CHECK (algorithm IS NULL OR quota_window IN ('second', 'minute')),
    ADD CONSTRAINT plan_limits_burst_token_bucket_only
        CHECK (burst IS NULL OR algorithm IS NOT DISTINCT FROM 'token_bucket'),
    ADD CONSTRAINT plan_limits_sliding_log_bounded
        CHECK (algorithm IS DISTINCT FROM 'sliding_log' OR limit_value <= 10000);

ALTER TABLE overrides
    ADD COLUMN algorithm text
        CHECK (algorithm IN ('sliding_window', 'fixed_window', 'sliding_log', 'token_bucket')),
    ADD COLUMN burst bigint CHECK (burst BETWEEN 1 AND 9007199254740991),
    ADD CONSTRAINT overrides_algorithm_short_only
        CHECK (algorithm IS NULL OR quota_window IN ('second', 'minute')),
    ADD CONSTRAINT overrides_burst_token_bucket_only
        CHECK (burst IS NULL OR algorithm IS NOT DISTINCT FROM 'token_bucket'),
    ADD CONSTRAINT overrides_sliding_log_bounded
        CHECK (algorithm IS DISTINCT FROM 'sliding_log' OR limit_value <= 10000);
