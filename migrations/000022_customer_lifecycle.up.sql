-- A plan's life: a customer may be suspended (its checks refused, with a
-- reason), may have a plan change scheduled for an instant, and may be on
-- a trial of another plan until an instant. quotad applies a scheduled
-- change or a trial's end at its instant, once: the process that does
-- locks the customer's row and clears the columns in the same transaction
-- (see store.ApplyPlanChanges).
ALTER TABLE customers
    ADD COLUMN status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    ADD COLUMN status_reason text NOT NULL DEFAULT '' CHECK (char_length(status_reason) <= 500),
    -- RESTRICT, as plan_key: a plan a customer will be on cannot be deleted.
    ADD COLUMN scheduled_plan_key text COLLATE "C" REFERENCES plans (key) ON DELETE RESTRICT,
    ADD COLUMN scheduled_at       timestamptz,
    ADD COLUMN trial_plan_key     text COLLATE "C" REFERENCES plans (key) ON DELETE RESTRICT,
    ADD COLUMN trial_ends_at      timestamptz,
    ADD CONSTRAINT customers_scheduled_complete CHECK ((scheduled_plan_key IS NULL) = (scheduled_at IS NULL)),
    ADD CONSTRAINT customers_trial_complete CHECK ((trial_plan_key IS NULL) = (trial_ends_at IS NULL));

-- What quotad has to apply, soonest first.
CREATE INDEX customers_scheduled_at ON customers (scheduled_at) WHERE scheduled_at IS NOT NULL;
CREATE INDEX customers_trial_ends_at ON customers (trial_ends_at) WHERE trial_ends_at IS NOT NULL;

-- trial.ended: a customer's trial ended and it went back to its plan. Such
-- an event concerns no window nor metric (metric is ''); it names the
-- trial's plan and the plan after it, and happens once per customer and
-- trial end.
ALTER TABLE usage_events
    ADD COLUMN plan_key      text COLLATE "C",
    ADD COLUMN next_plan_key text COLLATE "C",
    DROP CONSTRAINT usage_events_type_check,
    ADD CONSTRAINT usage_events_type_check
        CHECK (type IN ('usage.threshold', 'usage.overage_started', 'usage.limit_reached', 'grant.exhausted', 'trial.ended')),
    DROP CONSTRAINT usage_events_grant_check,
    ADD CONSTRAINT usage_events_grant_check CHECK (
        CASE type
            WHEN 'grant.exhausted' THEN grant_id IS NOT NULL AND quota_window IS NULL AND window_start IS NULL AND window_end IS NULL
            WHEN 'trial.ended' THEN grant_id IS NULL AND quota_window IS NULL AND window_start IS NULL AND window_end IS NULL
            ELSE grant_id IS NULL AND quota_window IS NOT NULL AND window_start IS NOT NULL AND window_end IS NOT NULL
        END),
    ADD CONSTRAINT usage_events_plan_check CHECK (
        (type = 'trial.ended') = (plan_key IS NOT NULL AND next_plan_key IS NOT NULL));
CREATE UNIQUE INDEX usage_events_trial_once ON usage_events (customer_id, occurred_at) WHERE type = 'trial.ended';
-- The purge finds them by age, having no window (as grant.exhausted's).
CREATE INDEX usage_events_trial_occurred ON usage_events (occurred_at) WHERE type = 'trial.ended';

ALTER TABLE webhooks
    DROP CONSTRAINT webhooks_events_check,
    ADD CONSTRAINT webhooks_events_check
        CHECK (events <@ ARRAY['usage.threshold', 'usage.overage_started', 'usage.limit_reached', 'grant.exhausted', 'trial.ended']);
