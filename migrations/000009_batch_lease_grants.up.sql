-- Grants of many counters in one statement: a process gathers the grants
-- its checks need while the previous batch is in flight and sends them
-- together, so that a cold start or a long tail of sparse customers costs
-- PostgreSQL one commit per batch, not one per counter.

-- quotad_lease_all makes, for each i, the grant quotad_lease (000008) made
-- of counter i: call p_seqs[i] of p_holder, p_needs[i] units all or none
-- and up to p_extras[i] more to hold within p_bounds[i], the lease then
-- reporting p_inflights[i] units in flight besides; p_helds[i] says the
-- caller believes it holds a lease there; p_global_starts[i] where the
-- granted units count in the metric's global usage. It returns one row per
-- counter: what was granted, the counter after, the units other live
-- holders report unused, whether the lease the caller believed held is
-- lost, and whether the customer or the metric is gone (deleted: nothing
-- granted, the others granted all the same); when nothing is granted, other live holders are asked for their
-- units (p_payloads[i] on p_channel, unless p_channel is null), or, when
-- none holds any, the counter is marked watched. Counters are locked in the
-- order of 000004, then global usage, summed by window, in its order. A
-- batch holds at most one call per counter.
CREATE FUNCTION quotad_lease_all(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_bounds bigint[], p_needs bigint[], p_extras bigint[],
    p_inflights bigint[], p_helds boolean[], p_global_starts timestamptz[],
    p_channel text, p_payloads text[])
RETURNS TABLE (o_i integer, o_granted bigint, o_used bigint, o_others bigint, o_lost boolean, o_gone boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(array_length(p_customers, 1), 0);
    v_units bigint[] := array_fill(0::bigint, ARRAY[v_n]);
    v_live oid[];
    v_used bigint;
    v_watched boolean;
    v_seq bigint;
    v_held boolean;
BEGIN
    -- A counter is created only when the need alone fits, and its customer
    -- and metric exist.
    INSERT INTO usage_counters (customer_id, metric, quota_window, window_start, used)
    SELECT s.customer_id, s.metric, s.quota_window, s.window_start, 0
    FROM unnest(p_customers, p_metrics, p_windows, p_starts, p_needs, p_bounds)
        AS s(customer_id, metric, quota_window, window_start, need, bound)
    WHERE s.need <= s.bound
      AND EXISTS (SELECT 1 FROM customers u WHERE u.id = s.customer_id)
      AND EXISTS (SELECT 1 FROM metrics m WHERE m.key = s.metric)
    ORDER BY s.customer_id COLLATE "C", s.metric COLLATE "C", quotad_window_rank(s.quota_window), s.window_start
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_windows, p_starts) AS s(customer_id, metric, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, quotad_window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    -- Who runs, read once for the batch (see quotad_live_leases).
    v_live := quotad_live_holders();
    FOR i IN 1 .. v_n LOOP
        o_i := i; o_granted := 0; o_used := 0; o_others := 0; o_lost := false; o_gone := false;
        SELECT c.used, c.watched INTO v_used, v_watched FROM usage_counters c
        WHERE c.customer_id = p_customers[i] AND c.metric = p_metrics[i]
          AND c.quota_window = p_windows[i] AND c.window_start = p_starts[i];
        IF NOT FOUND THEN -- the need alone is above the bound, or the customer went
            o_lost := p_helds[i];
            o_gone := NOT EXISTS (SELECT 1 FROM customers u WHERE u.id = p_customers[i])
                   OR NOT EXISTS (SELECT 1 FROM metrics m WHERE m.key = p_metrics[i]);
            RETURN NEXT;
            CONTINUE;
        END IF;
        o_used := v_used;
        SELECT l.seq, l.held INTO v_seq, v_held FROM counter_leases l
        WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.quota_window = p_windows[i]
          AND l.window_start = p_starts[i] AND l.holder = p_holder;
        IF v_seq >= p_seqs[i] THEN -- a late copy of a call already decided
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF p_helds[i] AND NOT coalesce(v_held, false) THEN
            o_lost := true;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_used + p_needs[i] <= p_bounds[i] THEN
            o_granted := LEAST(p_needs[i] + p_extras[i], p_bounds[i] - v_used);
            o_used := v_used + o_granted;
            UPDATE usage_counters c SET used = o_used
            WHERE c.customer_id = p_customers[i] AND c.metric = p_metrics[i]
              AND c.quota_window = p_windows[i] AND c.window_start = p_starts[i];
            INSERT INTO counter_leases AS l (customer_id, metric, quota_window, window_start, holder,
                                             unused, seq, granted, held, fenced)
            VALUES (p_customers[i], p_metrics[i], p_windows[i], p_starts[i], p_holder,
                    o_granted - p_needs[i] + p_inflights[i], p_seqs[i], o_granted, true, false)
            ON CONFLICT (customer_id, metric, quota_window, window_start, holder)
            DO UPDATE SET unused = EXCLUDED.unused, seq = EXCLUDED.seq, granted = EXCLUDED.granted,
                          held = true, fenced = false;
            IF p_global_starts[i] IS NOT NULL THEN
                v_units[i] := o_granted;
            END IF;
        END IF;
        SELECT coalesce(sum(l.unused), 0) INTO o_others FROM counter_leases l
        WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.quota_window = p_windows[i]
          AND l.window_start = p_starts[i] AND l.holder <> p_holder AND l.unused > 0
          AND (l.holder & 4294967295)::oid = ANY (v_live);
        IF o_granted = 0 AND o_others > 0 AND p_channel IS NOT NULL THEN
            PERFORM pg_notify(p_channel, p_payloads[i]);
        ELSIF o_granted = 0 AND o_others = 0 AND NOT v_watched THEN
            UPDATE usage_counters c SET watched = true
            WHERE c.customer_id = p_customers[i] AND c.metric = p_metrics[i]
              AND c.quota_window = p_windows[i] AND c.window_start = p_starts[i];
        END IF;
        RETURN NEXT;
    END LOOP;
    PERFORM quotad_add_global(p_metrics, p_windows, p_global_starts, v_units);
END
$$;

-- quotad_lease_all makes every grant; the one-counter form goes, so that
-- the rule of a grant is written once.
DROP FUNCTION quotad_lease(text, text, text, timestamptz, bigint, bigint, bigint, bigint, bigint, bigint,
                           boolean, timestamptz, text, text);
