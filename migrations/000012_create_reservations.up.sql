-- Reservations (costs known only afterwards): an estimate counted as an
-- admitted check counts it, held until it is committed with the actual
-- cost, released, or expired. The units themselves are counted where every
-- check's are (usage_counters, leases, the shared short windows); a row
-- here is what tells that they are held, and what to give back.

CREATE TABLE reservations (
    -- 'rsv_' and 24 hex digits, random.
    id          text        COLLATE "C" PRIMARY KEY,
    customer_id text        COLLATE "C" NOT NULL,
    metric      text        COLLATE "C" NOT NULL,
    -- The estimate, counted in every window of the check.
    cost        bigint      NOT NULL CHECK (cost > 0),
    state       text        NOT NULL DEFAULT 'held'
                            CHECK (state IN ('held', 'committed', 'released', 'expired')),
    -- The actual cost, once committed; over is how many of its units went
    -- beyond what a check could have been admitted up to.
    committed   bigint      CHECK (committed >= 0),
    over        bigint      NOT NULL DEFAULT 0 CHECK (over >= 0),
    expires_at  timestamptz NOT NULL,
    -- When the estimate was counted: the window instances it counted in
    -- are resolved from it.
    created_at  timestamptz NOT NULL,
    settled_at  timestamptz,
    request_id  text,
    -- The window instances that hold the estimate: [{"window", "start",
    -- "end"}], the end of a short window being its bucket's. A commit or a
    -- release gives units back only to those still current.
    windows     jsonb       NOT NULL,
    -- The reserve's answer, in the check answer's wire form: what a
    -- repeated request_id gets.
    answer      jsonb       NOT NULL,
    CHECK ((state = 'committed') = (committed IS NOT NULL))
);

-- A request id names one reservation of a customer.
CREATE UNIQUE INDEX reservations_request_id ON reservations (customer_id, request_id) WHERE request_id IS NOT NULL;

-- What the expiry sweep reads: held reservations by expiry.
CREATE INDEX reservations_held_expiry ON reservations (expires_at) WHERE state = 'held';
