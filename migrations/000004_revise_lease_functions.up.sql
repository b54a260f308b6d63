-- Every transaction that locks more than one row of usage_counters and
-- metric_usage takes its locks in one order, so that none waits for
-- another that waits for it (a deadlock, which PostgreSQL ends by failing
-- one of them): counters first, by customer, metric, window (shortest
-- first) and start, as a check's spans come and as the lease pool sorts
-- its settlements; then the metrics' global usage, by metric, window and
-- start, each window's shards in shard order. quotad_lease locks one
-- counter, then one shard: that order too.

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
-- window.
CREATE OR REPLACE FUNCTION quotad_settle_all(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_unused bigint[], p_global_starts timestamptz[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(array_length(p_customers, 1), 0);
    v_back bigint[] := array_fill(0::bigint, ARRAY[v_n]);
    v_used bigint;
BEGIN
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
