-- Retention (see docs/operations.md, "Retention"): what grows is purged in
-- small batches by age, each batch a short DELETE that must find its rows
-- without reading the whole table. These indexes let it.
--
-- They are built without CONCURRENTLY (a migration is one transaction):
-- writes to each table wait while its index builds, a few seconds per
-- million rows; checks do not write these tables (history is written in
-- batches, a second late).

-- Daily history, purged by day.
CREATE INDEX usage_history_day ON usage_history (day);

-- The audit log, purged by when each event happened.
CREATE INDEX audit_events_at ON audit_events (at);

-- Finished reservations, purged by when they settled; held ones are never
-- purged (reservations_held_expiry finds those).
CREATE INDEX reservations_settled ON reservations (settled_at) WHERE state <> 'held';

-- Delivered and failed webhook deliveries, purged by their last attempt.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (last_attempt_at) WHERE status <> 'pending';

-- A usage event's deliveries: what tells whether any is left, and what
-- the foreign key's cascade reads when an event goes.
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- Usage events, purged once their window has ended long enough ago.
CREATE INDEX usage_events_window_end ON usage_events (window_end);
