-- The refunds leave the audit log with the action they need.
DELETE FROM audit_events WHERE action = 'refund';
ALTER TABLE audit_events DROP CONSTRAINT audit_events_action_check,
    ADD CONSTRAINT audit_events_action_check CHECK (action IN ('create', 'update', 'delete', 'reset', 'release'));
