-- Back to 000009's quotad_lease_all.
CREATE OR REPLACE FUNCTION quotad_lease_all(
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
    r record;
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
    -- Every grant at once: each counter is its own (one call per counter),
    -- so no grant depends on another. The counters are locked; the
    -- statement sees them as they are now.
    FOR r IN
        WITH item AS (
            SELECT * FROM unnest(p_customers, p_metrics, p_windows, p_starts, p_seqs, p_bounds, p_needs,
                                 p_extras, p_inflights, p_helds)
                WITH ORDINALITY AS t(customer_id, metric, quota_window, window_start, seq, bound, need,
                                     extra, inflight, held, i)
        ), cur AS MATERIALIZED (
            SELECT t.*, c.used, c.watched, c.customer_id IS NOT NULL AS counted,
                   l.seq AS last_seq, coalesce(l.held, false) AS holding
            FROM item t
            LEFT JOIN usage_counters c
              ON c.customer_id = t.customer_id AND c.metric = t.metric
             AND c.quota_window = t.quota_window AND c.window_start = t.window_start
            -- One lookup per call, by the whole key (joined, the holder's
            -- every lease may be scanned for it).
            LEFT JOIN LATERAL (
                SELECT l.seq, l.held FROM counter_leases l
                WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.quota_window = t.quota_window
                  AND l.window_start = t.window_start AND l.holder = p_holder
                LIMIT 1) l ON true
        ), judged AS MATERIALIZED (
            SELECT cur.*,
                   -- late: a copy of a call already decided; lost: the
                   -- caller believes it holds a lease the store does not
                   counted AND coalesce(last_seq >= seq, false) AS late,
                   (NOT counted AND held)
                       OR (counted AND NOT coalesce(last_seq >= seq, false) AND held AND NOT holding) AS lost
            FROM cur
        ), decided AS MATERIALIZED (
            SELECT judged.*, counted AND NOT late AND NOT lost AS asked,
                   CASE WHEN counted AND NOT late AND NOT lost AND used + need <= bound
                        THEN LEAST(need + extra, bound - used) ELSE 0 END AS granted
            FROM judged
        ), counted_up AS (
            UPDATE usage_counters c SET used = c.used + d.granted
            FROM decided d
            WHERE c.customer_id = d.customer_id AND c.metric = d.metric
              AND c.quota_window = d.quota_window AND c.window_start = d.window_start AND d.granted > 0
        ), leased AS (
            INSERT INTO counter_leases AS l (customer_id, metric, quota_window, window_start, holder,
                                             unused, seq, granted, held, fenced)
            SELECT d.customer_id, d.metric, d.quota_window, d.window_start, p_holder,
                   d.granted - d.need + d.inflight, d.seq, d.granted, true, false
            FROM decided d WHERE d.granted > 0
            ON CONFLICT (customer_id, metric, quota_window, window_start, holder)
            DO UPDATE SET unused = EXCLUDED.unused, seq = EXCLUDED.seq, granted = EXCLUDED.granted,
                          held = true, fenced = false
        )
        SELECT d.i::integer AS i, d.granted, coalesce(d.used, 0) + d.granted AS used_after,
               CASE WHEN d.asked THEN (
                   SELECT coalesce(sum(l.unused), 0) FROM counter_leases l
                   WHERE l.customer_id = d.customer_id AND l.metric = d.metric AND l.quota_window = d.quota_window
                     AND l.window_start = d.window_start AND l.holder <> p_holder AND l.unused > 0
                     AND (l.holder & 4294967295)::oid = ANY (v_live))
               ELSE 0 END::bigint AS others,
               d.asked, d.counted, d.watched, d.lost
        FROM decided d
        ORDER BY d.i
    LOOP
        o_i := r.i; o_granted := r.granted; o_used := r.used_after; o_others := r.others;
        o_lost := r.lost; o_gone := false;
        IF NOT r.counted THEN -- the need alone is above the bound, or the customer went
            o_gone := NOT EXISTS (SELECT 1 FROM customers u WHERE u.id = p_customers[r.i])
                   OR NOT EXISTS (SELECT 1 FROM metrics m WHERE m.key = p_metrics[r.i]);
        ELSIF r.asked AND r.granted = 0 AND r.others > 0 AND p_channel IS NOT NULL THEN
            PERFORM pg_notify(p_channel, p_payloads[r.i]);
        ELSIF r.asked AND r.granted = 0 AND r.others = 0 AND NOT r.watched THEN
            UPDATE usage_counters c SET watched = true
            WHERE c.customer_id = p_customers[r.i] AND c.metric = p_metrics[r.i]
              AND c.quota_window = p_windows[r.i] AND c.window_start = p_starts[r.i];
        END IF;
        IF r.granted > 0 AND p_global_starts[r.i] IS NOT NULL THEN
            v_units[r.i] := r.granted;
        END IF;
        RETURN NEXT;
    END LOOP;
    PERFORM quotad_add_global(p_metrics, p_windows, p_global_starts, v_units);
END
$$;

ALTER FUNCTION quotad_lease_all(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], bigint[], bigint[],
                                bigint[], boolean[], timestamptz[], text, text[])
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
