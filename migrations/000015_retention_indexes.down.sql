DROP INDEX usage_events_window_end;
DROP INDEX webhook_deliveries_event;
DROP INDEX webhook_deliveries_finished;
DROP INDEX reservations_settled;
DROP INDEX audit_events_at;
DROP INDEX usage_history_day;
