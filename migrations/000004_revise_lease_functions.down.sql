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

DROP FUNCTION quotad_add_global(text[], text[], timestamptz[], bigint[]);
DROP FUNCTION quotad_window_rank(text);
