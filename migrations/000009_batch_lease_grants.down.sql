-- Back to 000008: grants one counter at a time.
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
