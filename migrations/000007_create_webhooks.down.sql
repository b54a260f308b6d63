DROP TABLE webhook_deliveries;
DROP TABLE usage_events;
DROP TABLE webhooks;
