-- Refunds are audited: POST /v1/refund gives units back to a customer's
-- windows, and with them takes units off the usage history statements are
-- made from. Each refund is an event with action 'refund' (after: the
-- metric, subject, request_id, cost asked and units refunded).
ALTER TABLE audit_events DROP CONSTRAINT audit_events_action_check,
    ADD CONSTRAINT audit_events_action_check CHECK (action IN ('create', 'update', 'delete', 'reset', 'release', 'refund'));
