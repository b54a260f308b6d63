DROP FUNCTION window_rank(text);
DROP TABLE audit_events;
DROP TABLE overrides;
DROP TABLE customers;
DROP TABLE plan_limits;
DROP TABLE plans;
DROP TABLE metric_capacities;
DROP TABLE metrics;
