DELETE FROM usage_events WHERE type = 'trial.ended';
UPDATE webhooks SET events = array_remove(events, 'trial.ended');
ALTER TABLE webhooks
    DROP CONSTRAINT webhooks_events_check,
    ADD CONSTRAINT webhooks_events_check
        CHECK (events <@ ARRAY['usage.threshold', 'usage.overage_started', 'usage.limit_reached', 'grant.exhausted']);
DROP INDEX usage_events_trial_occurred;
DROP INDEX usage_events_trial_once;
ALTER TABLE usage_events
    DROP CONSTRAINT usage_events_plan_check,
    DROP CONSTRAINT usage_events_grant_check,
    ADD CONSTRAINT usage_events_grant_check CHECK (
        CASE WHEN type = 'grant.exhausted'
             THEN grant_id IS NOT NULL AND quota_window IS NULL AND window_start IS NULL AND window_end IS NULL
             ELSE grant_id IS NULL AND quota_window IS NOT NULL AND window_start IS NOT NULL AND window_end IS NOT NULL
        END),
    DROP CONSTRAINT usage_events_type_check,
    ADD CONSTRAINT usage_events_type_check
        CHECK (type IN ('usage.threshold', 'usage.overage_started', 'usage.limit_reached', 'grant.exhausted')),
    DROP COLUMN next_plan_key,
    DROP COLUMN plan_key;

DROP INDEX customers_trial_ends_at;
DROP INDEX customers_scheduled_at;
ALTER TABLE customers
    DROP CONSTRAINT customers_trial_complete,
    DROP CONSTRAINT customers_scheduled_complete,
    DROP COLUMN trial_ends_at,
    DROP COLUMN trial_plan_key,
    DROP COLUMN scheduled_at,
    DROP COLUMN scheduled_plan_key,
    DROP COLUMN status_reason,
    DROP COLUMN status;
