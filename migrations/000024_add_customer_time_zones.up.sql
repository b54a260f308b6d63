-- A customer's time zone (an IANA name): its day, week and month windows and
-- its billing periods start at local midnight there. quotad checks the name
-- before writing it.
ALTER TABLE customers
    ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC' CHECK (time_zone <> ''),
    -- A changed time zone applies from the next window: the day and week
    -- windows in progress at the change are pinned with their exact bounds
    -- (the month is pinned in anchor_pinned_start/_end, as for a changed
    -- anchor day).
    ADD COLUMN day_pinned_start  timestamptz,
    ADD COLUMN day_pinned_end    timestamptz,
    ADD COLUMN week_pinned_start timestamptz,
    ADD COLUMN week_pinned_end   timestamptz,
    ADD CONSTRAINT customers_day_pin_complete CHECK (
        (day_pinned_start IS NULL AND day_pinned_end IS NULL) OR day_pinned_start < day_pinned_end),
    ADD CONSTRAINT customers_week_pin_complete CHECK (
        (week_pinned_start IS NULL AND week_pinned_end IS NULL) OR week_pinned_start < week_pinned_end);

-- Billing terms keep the time zone their periods were counted in, as they
-- keep the anchor day.
ALTER TABLE plan_assignments
    ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC' CHECK (time_zone <> '');
