-- Lease functions revised: one order of locks, a view of the leases of
-- live holders, and settlements and reports that commit without waiting
-- for the disk by themselves.
--
-- Grants, settlements, the ledger's charges and give-backs, and writes of
-- global usage lock rows of usage_counters and metric_usage in one order,
-- so that none waits for another that waits for it (a deadlock, which
-- PostgreSQL ends by failing one of them): counters first, by customer,
-- metric, window (shortest first) and start, as a check's spans come and
-- as the lease pool sorts its settlements; then the metrics' global
-- usage, by metric, window and start, each window's shards in shard
-- order. quotad_lease locks one counter, then one shard: that order too.

-- quotad_window_rank orders windows shortest first.
CREATE FUNCTION quotad_window_rank(p_window text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_position(ARRAY['hour', 'day', 'week', 'month'], p_window)
$$;

-- quotad_count_global adds p_units (taking them off when negative: from
-- the fullest shard first, never below zero) to a metric's global usage in
-- one window. Units are added to one random shard; taking them off locks
-- the window's shards in shard order first.
CREATE OR REPLACE FUNCTION quotad_count_global(p_metric text, p_window text, p_start timestamptz, p_units bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_units = 0 THEN
        RETURN;
    ELSIF p_units > 0 THEN
        INSERT INTO metric_usage AS g (metric, quota_window, window_start, shard, used)
        VALUES (p_metric, p_window, p_start, floor(random() * 16)::smallint, p_units)
        ON CONFLICT (metric, quota_window, window_start, shard) DO UPDATE SET used = g.used + EXCLUDED.used;
        RETURN;
    END IF;
    -- Each shard gives what is left to take once the fuller ones gave
    -- theirs, at most all it has.
    WITH s AS MATERIALIZED (
        SELECT g.shard, g.used FROM metric_usage g
        WHERE g.metric = p_metric AND g.quota_window = p_window AND g.window_start = p_start AND g.used > 0
        ORDER BY g.shard
        FOR UPDATE
    ), t AS (
        SELECT s.shard, LEAST(s.used, -p_units - (sum(s.used) OVER (ORDER BY s.used DESC, s.shard) - s.used)) AS took
        FROM s
    )
    UPDATE metric_usage g SET used = g.used - t.took
    FROM t
    WHERE g.metric = p_metric AND g.quota_window = p_window AND g.window_start = p_start
      AND g.shard = t.shard AND t.took > 0;
END
$$;

-- quotad_add_global adds units to the global usage of many windows at
-- once (p_units[i] to window i; negative ones are taken off as
-- quotad_count_global does), summed by window and in the windows' order.
CREATE FUNCTION quotad_add_global(p_metrics text[], p_windows text[], p_starts timestamptz[], p_units bigint[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    d record;
BEGIN
    FOR d IN
        SELECT u.metric, u.quota_window, u.window_start, sum(u.units)::bigint AS units
        FROM unnest(p_metrics, p_windows, p_starts, p_units) AS u(metric, quota_window, window_start, units)
        WHERE u.units <> 0
        GROUP BY u.metric, u.quota_window, u.window_start
        HAVING sum(u.units) <> 0
        ORDER BY u.metric COLLATE "C", quotad_window_rank(u.quota_window), u.window_start
    LOOP
        PERFORM quotad_count_global(d.metric, d.quota_window, d.window_start, d.units);
    END LOOP;
END
$$;

-- quotad_settle_all settles many leases of p_holder at once, each as
-- quotad_settle: it locks their counters first, then gives back in the
-- metrics' global usage what it gave back in the counters, summed by
-- window. Its transaction commits without waiting for the disk
-- (synchronous_commit off): a settlement lost in a crash of PostgreSQL
-- only leaves units counted that were not used. So it runs in a
-- transaction of its own, never in one that grants units.
CREATE OR REPLACE FUNCTION quotad_settle_all(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_unused bigint[], p_global_starts timestamptz[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(array_length(p_customers, 1), 0);
    v_back bigint[] := array_fill(0::bigint, ARRAY[v_n]);
    v_used bigint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_windows, p_starts) AS s(customer_id, metric, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, quotad_window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    FOR i IN 1 .. v_n LOOP
        SELECT c.used INTO v_used FROM usage_counters c
        WHERE c.customer_id = p_customers[i] AND c.metric = p_metrics[i]
          AND c.quota_window = p_windows[i] AND c.window_start = p_starts[i];
        CONTINUE WHEN NOT FOUND;
        DELETE FROM counter_leases l
        WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.quota_window = p_windows[i]
          AND l.window_start = p_starts[i] AND l.holder = p_holder;
        CONTINUE WHEN NOT FOUND;
        UPDATE usage_counters c SET used = c.used - LEAST(p_unused[i], v_used)
        WHERE c.customer_id = p_customers[i] AND c.metric = p_metrics[i]
          AND c.quota_window = p_windows[i] AND c.window_start = p_starts[i];
        IF p_global_starts[i] IS NOT NULL THEN
            v_back[i] := -LEAST(p_unused[i], v_used);
        END IF;
    END LOOP;
    PERFORM quotad_add_global(p_metrics, p_windows, p_global_starts, v_back);
END
$$;

-- quotad_live_holders returns the holders (their keys as oids) of the
-- processes that run on this schema: see quotad_holder_alive. It is
-- PL/pgSQL so that its statement is planned once per session.
CREATE FUNCTION quotad_live_holders() RETURNS oid[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN ARRAY(
        SELECT k.objid FROM pg_locks k
        WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
          AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
          AND k.classid = (quotad_lock_class()::bigint & 4294967295)::oid);
END
$$;

-- quotad_live_leases are the leases whose holders run. A statement reads
-- the advisory locks once (the sub-select is evaluated once, and only if a
-- lease is read), where quotad_holder_alive reads them once per lease.
CREATE VIEW quotad_live_leases AS
SELECT l.*
FROM counter_leases l
WHERE (l.holder & 4294967295)::oid = ANY ((SELECT quotad_live_holders())::oid[]);

-- quotad_lease and quotad_recall as in 000003, reading quotad_live_leases.
CREATE OR REPLACE FUNCTION quotad_lease(
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
    SELECT coalesce(sum(l.unused), 0) INTO o_others FROM quotad_live_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.quota_window = p_window
      AND l.window_start = p_start AND l.holder <> p_holder AND l.unused > 0;
    IF o_granted = 0 AND o_others > 0 AND p_channel IS NOT NULL
       AND p_need <= p_threshold - o_used + o_others THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION quotad_recall(
    p_customer text, p_metric text, p_window text, p_start timestamptz,
    p_holder bigint, p_channel text, p_payload text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_leases integer;
BEGIN
    SELECT count(*) INTO v_leases FROM quotad_live_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.quota_window = p_window
      AND l.window_start = p_start AND l.holder <> p_holder;
    IF v_leases > 0 THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
    RETURN v_leases;
END
$$;

-- quotad_report records what p_holder holds unused in many leases at once
-- and returns the positions (from 1) of those the store no longer holds.
-- Like quotad_settle_all, its transaction commits without waiting for
-- the disk, so it runs in one of its own.
CREATE OR REPLACE FUNCTION quotad_report(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_unused bigint[]) RETURNS SETOF integer
LANGUAGE sql AS $$
    SELECT set_config('synchronous_commit', 'off', true);
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
