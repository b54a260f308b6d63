-- Lease holders: the processes that hold (or held) leases, so that a dead
-- one's leases are reclaimed by the others.
--
-- A process registers its holder key when it first takes its advisory
-- lock (see quotad_holder_alive), and clears gone_since each time it takes
-- the lock again. A running process finds, every few seconds, the holders
-- whose lock is gone: it marks when it first saw each gone (gone_since),
-- and once one has been gone for the reclaim bound, takes its leases'
-- units off their counters (as a settlement would, without the metric's
-- global usage, which no counter names) and deletes its row. An admin
-- may release a holder known dead at once.
CREATE TABLE lease_holders (
    holder     bigint      PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    gone_since timestamptz
);

-- The holders of leases from before this migration.
INSERT INTO lease_holders (holder)
SELECT DISTINCT holder FROM counter_leases WHERE held
ON CONFLICT DO NOTHING;

-- An admin's release of a holder is audited.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_action_check,
    ADD CONSTRAINT audit_events_action_check CHECK (action IN ('create', 'update', 'delete', 'reset', 'release'));
