-- Leases: blocks of long-window units a quotad process reserves in a
-- counter with one conditional update, then admits checks from in memory.
-- A counter's used counts every unit granted: admitted ones and those held
-- unused in leases. So the condition that keeps a window within its
-- threshold stays the one atomic update it always was, however many
-- processes hold leases.

CREATE TABLE counter_leases (
    customer_id  text        COLLATE "C" NOT NULL,
    metric       text        COLLATE "C" NOT NULL,
    quota_window text        NOT NULL,
    window_start timestamptz NOT NULL,
    -- The holding process, named by the key (an int4) of the advisory lock
    -- it holds on a session of its own while it runs (see
    -- quotad_holder_alive).
    holder       bigint      NOT NULL,
    -- Units the holder held unused when it last reported: never fewer than
    -- it holds now, as in between it only admits from them.
    unused       bigint      NOT NULL CHECK (unused >= 0),
    PRIMARY KEY (customer_id, metric, quota_window, window_start, holder),
    FOREIGN KEY (customer_id, metric, quota_window, window_start)
        REFERENCES usage_counters (customer_id, metric, quota_window, window_start) ON DELETE CASCADE
);

-- Whether the process holding leases as p_holder still runs: it holds,
-- on a session of its own, the advisory lock pg_advisory_lock(class,
-- p_holder), class being quotad_lock_class() (this schema's), which
-- PostgreSQL releases when the process dies. A lock of two int4 keys is
-- filed as classid (the first, as an unsigned oid), objid (the second),
-- objsubid 2.
CREATE FUNCTION quotad_lock_class() RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT hashtext('quotad:' || current_schema())
$$;

CREATE FUNCTION quotad_holder_alive(p_holder bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 2
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND classid = (quotad_lock_class()::bigint & 4294967295)::oid
          AND objid = (p_holder & 4294967295)::oid)
$$;

-- Whether any process other than p_holder runs on this schema.
CREATE FUNCTION quotad_others_alive(p_holder bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 2
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND classid = (quotad_lock_class()::bigint & 4294967295)::oid
          AND objid <> (p_holder & 4294967295)::oid)
$$;

-- quotad_count_global adds p_units (taking them off when negative: from
-- the fullest shard first, never below zero) to a metric's global usage in
-- one window.
CREATE FUNCTION quotad_count_global(p_metric text, p_window text, p_start timestamptz, p_units bigint)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_shard smallint;
    v_used bigint;
BEGIN
    IF p_units > 0 THEN
        INSERT INTO metric_usage AS g (metric, quota_window, window_start, shard, used)
        VALUES (p_metric, p_window, p_start, floor(random() * 16)::smallint, p_units)
        ON CONFLICT (metric, quota_window, window_start, shard) DO UPDATE SET used = g.used + EXCLUDED.used;
        RETURN;
    END IF;
    p_units := -p_units;
    WHILE p_units > 0 LOOP
        SELECT g.shard, g.used INTO v_shard, v_used FROM metric_usage g
        WHERE g.metric = p_metric AND g.quota_window = p_window AND g.window_start = p_start AND g.used > 0
        ORDER BY g.used DESC LIMIT 1
        FOR UPDATE;
        EXIT WHEN NOT FOUND;
        UPDATE metric_usage g SET used = g.used - LEAST(v_used, p_units)
        WHERE g.metric = p_metric AND g.quota_window = p_window AND g.window_start = p_start AND g.shard = v_shard;
        p_units := p_units - LEAST(v_used, p_units);
    END LOOP;
END
$$;

-- quotad_lease grants p_holder p_need units of a counter, and up to p_extra
-- more to hold, if p_need fits within p_threshold; it never grants part of
-- p_need. The holder's lease then reports what it holds unused: the units
-- granted beyond p_need, and p_inflight more (units its checks in progress
-- took and may yet put back). Where the metric declares a capacity for the
-- window (p_global_start, else null), the granted units count in its
-- global usage at once, so that spare capacity is never spent twice. It returns what it granted, the counter after, and the units
-- other live holders report holding unused (which a recall could bring
-- back). When p_need does not fit but those units would make room, it asks
-- their holders to give them back: a notification with p_payload on
-- p_channel (no notification when p_channel is null).
--
-- p_held says the caller believes it holds a lease here. When the store
-- has none (a reset or the customer's deletion ended it, with the units it
-- held), o_lost is true and nothing is granted: the caller must drop what
-- it thought it held.
CREATE FUNCTION quotad_lease(
    p_customer text, p_metric text, p_window text, p_start timestamptz,
    p_holder bigint, p_threshold bigint, p_need bigint, p_extra bigint, p_inflight bigint,
    p_held boolean, p_global_start timestamptz, p_channel text, p_payload text,
    OUT o_granted bigint, OUT o_used bigint, OUT o_others bigint, OUT o_lost boolean)
LANGUAGE plpgsql AS $$
BEGIN
    o_granted := 0; o_used := 0; o_others := 0; o_lost := false;
    IF p_need <= p_threshold THEN
        INSERT INTO usage_counters (customer_id, metric, quota_window, window_start, used)
        VALUES (p_customer, p_metric, p_window, p_start, 0)
        ON CONFLICT DO NOTHING;
    END IF;
    -- The counter's row lock serializes every grant, give-back and reset
    -- of it; each of them takes it first.
    SELECT c.used INTO o_used FROM usage_counters c
    WHERE c.customer_id = p_customer AND c.metric = p_metric
      AND c.quota_window = p_window AND c.window_start = p_start
    FOR UPDATE;
    IF NOT FOUND THEN -- the cost alone is above the threshold
        o_used := 0;
        o_lost := p_held;
        RETURN;
    END IF;
    IF p_held AND NOT EXISTS (
        SELECT 1 FROM counter_leases l
        WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.quota_window = p_window
          AND l.window_start = p_start AND l.holder = p_holder) THEN
        o_lost := true;
        RETURN;
    END IF;
    IF o_used + p_need <= p_threshold THEN
        o_granted := LEAST(p_need + p_extra, p_threshold - o_used);
        o_used := o_used + o_granted;
        UPDATE usage_counters c SET used = o_used
        WHERE c.customer_id = p_customer AND c.metric = p_metric
          AND c.quota_window = p_window AND c.window_start = p_start;
        INSERT INTO counter_leases AS l (customer_id, metric, quota_window, window_start, holder, unused)
        VALUES (p_customer, p_metric, p_window, p_start, p_holder, o_granted - p_need + p_inflight)
        ON CONFLICT (customer_id, metric, quota_window, window_start, holder)
        DO UPDATE SET unused = EXCLUDED.unused;
        IF p_global_start IS NOT NULL THEN
            PERFORM quotad_count_global(p_metric, p_window, p_global_start, o_granted);
        END IF;
    END IF;
    SELECT coalesce(sum(l.unused), 0) INTO o_others FROM counter_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.quota_window = p_window
      AND l.window_start = p_start AND l.holder <> p_holder AND l.unused > 0
      AND quotad_holder_alive(l.holder);
    IF o_granted = 0 AND o_others > 0 AND p_channel IS NOT NULL
       AND p_need <= p_threshold - o_used + o_others THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
END
$$;

-- quotad_settle ends p_holder's lease of a counter: the p_unused units it
-- held unused are no longer counted, in the counter nor in the metric's
-- global usage (p_global_start as in quotad_lease). It returns the units
-- given back: none when the store holds no such lease (a reset ended it,
-- and its units with it).
CREATE FUNCTION quotad_settle(
    p_customer text, p_metric text, p_window text, p_start timestamptz,
    p_holder bigint, p_unused bigint, p_global_start timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_used bigint;
    v_back bigint;
BEGIN
    SELECT c.used INTO v_used FROM usage_counters c
    WHERE c.customer_id = p_customer AND c.metric = p_metric
      AND c.quota_window = p_window AND c.window_start = p_start
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    DELETE FROM counter_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.quota_window = p_window
      AND l.window_start = p_start AND l.holder = p_holder;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    v_back := LEAST(p_unused, v_used);
    UPDATE usage_counters c SET used = c.used - v_back
    WHERE c.customer_id = p_customer AND c.metric = p_metric
      AND c.quota_window = p_window AND c.window_start = p_start;
    IF p_global_start IS NOT NULL AND v_back > 0 THEN
        PERFORM quotad_count_global(p_metric, p_window, p_global_start, -v_back);
    END IF;
    RETURN v_back;
END
$$;

-- quotad_recall asks the other live processes holding leases of a counter
-- to settle them (a notification with p_payload on p_channel, when there is
-- any) and returns how many such leases there are.
CREATE FUNCTION quotad_recall(
    p_customer text, p_metric text, p_window text, p_start timestamptz,
    p_holder bigint, p_channel text, p_payload text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_leases integer;
BEGIN
    SELECT count(*) INTO v_leases FROM counter_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.quota_window = p_window
      AND l.window_start = p_start AND l.holder <> p_holder AND quotad_holder_alive(l.holder);
    IF v_leases > 0 THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
    RETURN v_leases;
END
$$;

-- quotad_settle_all settles many leases of p_holder at once, in the order
-- given (callers sort them as counters are ordered, so that concurrent
-- settlements lock counters in the same order): each as quotad_settle.
CREATE FUNCTION quotad_settle_all(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_unused bigint[], p_global_starts timestamptz[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_customers, 1), 0) LOOP
        PERFORM quotad_settle(p_customers[i], p_metrics[i], p_windows[i], p_starts[i],
                              p_holder, p_unused[i], p_global_starts[i]);
    END LOOP;
END
$$;

-- quotad_report records what p_holder holds unused in many leases at once
-- and returns the positions (from 1) of those the store no longer holds.
CREATE FUNCTION quotad_report(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_unused bigint[]) RETURNS SETOF integer
LANGUAGE sql AS $$
    WITH r AS (
        SELECT * FROM unnest(p_customers, p_metrics, p_windows, p_starts, p_unused)
            WITH ORDINALITY AS r(customer_id, metric, quota_window, window_start, unused, i)
    ), updated AS (
        UPDATE counter_leases l SET unused = r.unused
        FROM r
        WHERE l.customer_id = r.customer_id AND l.metric = r.metric AND l.quota_window = r.quota_window
          AND l.window_start = r.window_start AND l.holder = p_holder
        RETURNING r.i
    )
    SELECT r.i::integer FROM r WHERE r.i NOT IN (SELECT i FROM updated)
$$;
