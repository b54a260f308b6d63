DROP TABLE stripe_meter_events;
DROP TABLE stripe_usage_pending;
