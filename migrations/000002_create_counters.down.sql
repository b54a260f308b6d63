DROP TABLE usage_history;
DROP TABLE request_ids;
DROP TABLE metric_usage;
DROP TABLE usage_counters;
