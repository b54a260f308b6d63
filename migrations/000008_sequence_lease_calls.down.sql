-- Back to 000004: leases without call numbers, counters without marks.
DROP FUNCTION quotad_resolve(text[], text[], text[], timestamptz[], bigint, bigint[]);
DROP FUNCTION quotad_report(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], text, text[]);
DROP FUNCTION quotad_settle_all(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], timestamptz[], text, text[]);
DROP FUNCTION quotad_freed(text, text, text, timestamptz, text, text);
DROP FUNCTION quotad_lease(text, text, text, timestamptz, bigint, bigint, bigint, bigint, bigint, bigint, boolean, timestamptz, text, text);
-- Rows that only kept a fence are no leases.
DELETE FROM counter_leases WHERE NOT held;
ALTER TABLE counter_leases DROP COLUMN seq, DROP COLUMN granted, DROP COLUMN fenced, DROP COLUMN held;
ALTER TABLE usage_counters DROP COLUMN watched;

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

CREATE FUNCTION quotad_settle_all(
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

CREATE FUNCTION quotad_report(
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
