ALTER TABLE plan_assignments DROP COLUMN time_zone;
ALTER TABLE customers
    DROP CONSTRAINT customers_week_pin_complete,
    DROP CONSTRAINT customers_day_pin_complete,
    DROP COLUMN week_pinned_end,
    DROP COLUMN week_pinned_start,
    DROP COLUMN day_pinned_end,
    DROP COLUMN day_pinned_start,
    DROP COLUMN time_zone;
