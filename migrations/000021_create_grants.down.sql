DELETE FROM usage_events WHERE type = 'grant.exhausted';
UPDATE webhooks SET events = array_remove(events, 'grant.exhausted');
ALTER TABLE webhooks
    DROP CONSTRAINT webhooks_events_check,
    ADD CONSTRAINT webhooks_events_check
        CHECK (events <@ ARRAY['usage.threshold', 'usage.overage_started', 'usage.limit_reached']);
DROP INDEX usage_events_grant_occurred;
DROP INDEX usage_events_grant_once;
ALTER TABLE usage_events
    DROP CONSTRAINT usage_events_grant_check,
    DROP CONSTRAINT usage_events_type_check,
    ADD CONSTRAINT usage_events_type_check
        CHECK (type IN ('usage.threshold', 'usage.overage_started', 'usage.limit_reached')),
    ALTER COLUMN quota_window SET NOT NULL,
    ALTER COLUMN window_start SET NOT NULL,
    ALTER COLUMN window_end SET NOT NULL,
    DROP COLUMN grant_id;

ALTER TABLE overrides DROP COLUMN rollover_max;
ALTER TABLE plan_limits DROP COLUMN rollover_max;

DROP TABLE granted_usage;
DROP TABLE grant_draws;
DROP TABLE grants;
