-- Back to 000008: lease calls one counter at a time.
DROP INDEX usage_counters_window_start;
CREATE INDEX usage_counters_window_start ON usage_counters (window_start);
ALTER FUNCTION quotad_resolve(text[], text[], text[], timestamptz[], bigint, bigint[])
    RESET enable_seqscan RESET enable_bitmapscan RESET enable_hashjoin RESET enable_mergejoin;
DROP FUNCTION quotad_lease_all(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], bigint[], bigint[],
                               bigint[], boolean[], timestamptz[], text, text[]);

CREATE FUNCTION quotad_lease(
    p_customer text, p_metric text, p_window text, p_start timestamptz,
    p_holder bigint, p_seq bigint, p_bound bigint, p_need bigint, p_extra bigint, p_inflight bigint,
    p_held boolean, p_global_start timestamptz, p_channel text, p_payload text,
    OUT o_granted bigint, OUT o_used bigint, OUT o_others bigint, OUT o_lost boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_watched boolean;
    v_seq bigint;
    v_held boolean;
BEGIN
    o_granted := 0; o_used := 0; o_others := 0; o_lost := false;
    IF p_need <= p_bound THEN
        INSERT INTO usage_counters (customer_id, metric, quota_window, window_start, used)
        VALUES (p_customer, p_metric, p_window, p_start, 0)
        ON CONFLICT DO NOTHING;
    END IF;
    -- The counter's row lock serializes every call on it and its leases:
    -- each takes it first.
    SELECT c.used, c.watched INTO o_used, v_watched FROM usage_counters c
    WHERE c.customer_id = p_customer AND c.metric = p_metric
      AND c.quota_window = p_window AND c.window_start = p_start
    FOR UPDATE;
    IF NOT FOUND THEN -- the need alone is above the bound
        o_used := 0;
        o_lost := p_held;
        RETURN;
    END IF;
    SELECT l.seq, l.held INTO v_seq, v_held FROM counter_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.quota_window = p_window
      AND l.window_start = p_start AND l.holder = p_holder;
    IF v_seq >= p_seq THEN -- a late copy of a call already decided
        RETURN;
    END IF;
    IF p_held AND NOT coalesce(v_held, false) THEN
        o_lost := true;
        RETURN;
    END IF;
    IF o_used + p_need <= p_bound THEN
        o_granted := LEAST(p_need + p_extra, p_bound - o_used);
        o_used := o_used + o_granted;
        UPDATE usage_counters c SET used = o_used
        WHERE c.customer_id = p_customer AND c.metric = p_metric
          AND c.quota_window = p_window AND c.window_start = p_start;
        INSERT INTO counter_leases AS l (customer_id, metric, quota_window, window_start, holder,
                                         unused, seq, granted, held, fenced)
        VALUES (p_customer, p_metric, p_window, p_start, p_holder,
                o_granted - p_need + p_inflight, p_seq, o_granted, true, false)
        ON CONFLICT (customer_id, metric, quota_window, window_start, holder)
        DO UPDATE SET unused = EXCLUDED.unused, seq = EXCLUDED.seq, granted = EXCLUDED.granted,
                      held = true, fenced = false;
        IF p_global_start IS NOT NULL THEN
            PERFORM quotad_count_global(p_metric, p_window, p_global_start, o_granted);
        END IF;
    END IF;
    SELECT coalesce(sum(l.unused), 0) INTO o_others FROM quotad_live_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.quota_window = p_window
      AND l.window_start = p_start AND l.holder <> p_holder AND l.unused > 0;
    IF o_granted = 0 AND o_others > 0 AND p_channel IS NOT NULL THEN
        PERFORM pg_notify(p_channel, p_payload);
    ELSIF o_granted = 0 AND o_others = 0 AND NOT v_watched THEN
        UPDATE usage_counters c SET watched = true
        WHERE c.customer_id = p_customer AND c.metric = p_metric
          AND c.quota_window = p_window AND c.window_start = p_start;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION quotad_settle_all(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_unused bigint[], p_global_starts timestamptz[],
    p_channel text, p_payloads text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(array_length(p_customers, 1), 0);
    v_back bigint[] := array_fill(0::bigint, ARRAY[v_n]);
    v_used bigint;
    v_give bigint;
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
        UPDATE counter_leases l SET held = false, unused = 0, granted = 0, seq = p_seqs[i], fenced = false
        WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.quota_window = p_windows[i]
          AND l.window_start = p_starts[i] AND l.holder = p_holder AND l.held AND l.seq < p_seqs[i];
        CONTINUE WHEN NOT FOUND;
        v_give := LEAST(p_unused[i], v_used);
        CONTINUE WHEN v_give = 0;
        UPDATE usage_counters c SET used = c.used - v_give
        WHERE c.customer_id = p_customers[i] AND c.metric = p_metrics[i]
          AND c.quota_window = p_windows[i] AND c.window_start = p_starts[i];
        IF p_global_starts[i] IS NOT NULL THEN
            v_back[i] := -v_give;
        END IF;
        IF p_channel IS NOT NULL THEN
            PERFORM quotad_freed(p_customers[i], p_metrics[i], p_windows[i], p_starts[i], p_channel, p_payloads[i]);
        END IF;
    END LOOP;
    PERFORM quotad_add_global(p_metrics, p_windows, p_global_starts, v_back);
END
$$;

CREATE OR REPLACE FUNCTION quotad_report(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_unused bigint[], p_channel text, p_payloads text[])
RETURNS SETOF integer
LANGUAGE plpgsql AS $$
DECLARE
    v_seq bigint;
    v_held boolean;
    v_unused bigint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR i IN 1 .. coalesce(array_length(p_customers, 1), 0) LOOP
        SELECT l.seq, l.held, l.unused INTO v_seq, v_held, v_unused FROM counter_leases l
        WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.quota_window = p_windows[i]
          AND l.window_start = p_starts[i] AND l.holder = p_holder
        FOR UPDATE;
        IF NOT FOUND OR NOT v_held THEN
            RETURN NEXT i;
            CONTINUE;
        END IF;
        CONTINUE WHEN v_seq >= p_seqs[i];
        UPDATE counter_leases l SET unused = p_unused[i], seq = p_seqs[i], fenced = false
        WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.quota_window = p_windows[i]
          AND l.window_start = p_starts[i] AND l.holder = p_holder;
        IF p_unused[i] > v_unused AND p_channel IS NOT NULL THEN
            PERFORM quotad_freed(p_customers[i], p_metrics[i], p_windows[i], p_starts[i], p_channel, p_payloads[i]);
        END IF;
    END LOOP;
END
$$;
