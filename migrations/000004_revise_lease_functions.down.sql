-- Back to the definitions of 000003.
CREATE OR REPLACE FUNCTION quotad_count_global(p_metric text, p_window text, p_start timestamptz, p_units bigint)
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

CREATE OR REPLACE FUNCTION quotad_settle_all(
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

CREATE OR REPLACE FUNCTION quotad_recall(
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

CREATE OR REPLACE FUNCTION quotad_report(
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

DROP VIEW quotad_live_leases;
DROP FUNCTION quotad_live_holders();
DROP FUNCTION quotad_add_global(text[], text[], timestamptz[], bigint[]);
DROP FUNCTION quotad_window_rank(text);
