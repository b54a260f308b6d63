-- Grants of many counters in one statement: a process gathers the grants
-- its checks need while the previous batch is in flight and sends them
-- together, so that a cold start or a long tail of sparse customers costs
-- PostgreSQL one commit per batch, not one per counter. Grants,
-- settlements and reports of many leases are each decided as one set (a
-- batch holds one call per counter, so no call of it depends on another),
-- not counter by counter: a long tail of sparse customers settles tens of
-- thousands of idle leases a minute.

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

-- quotad_lease_all makes every grant; the one-counter form goes, so that
-- the rule of a grant is written once.
DROP FUNCTION quotad_lease(text, text, text, timestamptz, bigint, bigint, bigint, bigint, bigint, bigint,
                           boolean, timestamptz, text, text);

-- quotad_settle_all as in 000008, decided as one set.
CREATE OR REPLACE FUNCTION quotad_settle_all(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_unused bigint[], p_global_starts timestamptz[],
    p_channel text, p_payloads text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(array_length(p_customers, 1), 0);
    v_back bigint[] := array_fill(0::bigint, ARRAY[v_n]);
    r record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_windows, p_starts) AS s(customer_id, metric, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, quotad_window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    FOR r IN
        WITH item AS (
            SELECT * FROM unnest(p_customers, p_metrics, p_windows, p_starts, p_seqs, p_unused)
                WITH ORDINALITY AS t(customer_id, metric, quota_window, window_start, seq, unused, i)
        ), settled AS (
            -- Only a lease the store holds, and not by a later call.
            UPDATE counter_leases l SET held = false, unused = 0, granted = 0, seq = t.seq, fenced = false
            FROM item t
            WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.quota_window = t.quota_window
              AND l.window_start = t.window_start AND l.holder = p_holder AND l.held AND l.seq < t.seq
            RETURNING t.i, t.customer_id, t.metric, t.quota_window, t.window_start, t.unused
        ), back AS MATERIALIZED (
            SELECT s.i, s.customer_id, s.metric, s.quota_window, s.window_start,
                   LEAST(s.unused, c.used) AS units, c.watched
            FROM settled s
            JOIN usage_counters c
              ON c.customer_id = s.customer_id AND c.metric = s.metric
             AND c.quota_window = s.quota_window AND c.window_start = s.window_start
        ), given AS (
            UPDATE usage_counters c SET used = c.used - b.units, watched = c.watched AND b.units = 0
            FROM back b
            WHERE c.customer_id = b.customer_id AND c.metric = b.metric
              AND c.quota_window = b.quota_window AND c.window_start = b.window_start AND b.units > 0
        )
        SELECT b.i::integer AS i, b.units, b.watched FROM back b WHERE b.units > 0
    LOOP
        IF p_global_starts[r.i] IS NOT NULL THEN
            v_back[r.i] := -r.units;
        END IF;
        IF r.watched AND p_channel IS NOT NULL THEN
            PERFORM pg_notify(p_channel, p_payloads[r.i]);
        END IF;
    END LOOP;
    PERFORM quotad_add_global(p_metrics, p_windows, p_global_starts, v_back);
END
$$;

-- quotad_report as in 000008, decided as one set.
CREATE OR REPLACE FUNCTION quotad_report(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_unused bigint[], p_channel text, p_payloads text[])
RETURNS SETOF integer
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    -- The leases are locked first, in the counters' order (a report locks
    -- no counter).
    PERFORM 1 FROM counter_leases l
    JOIN unnest(p_customers, p_metrics, p_windows, p_starts) AS s(customer_id, metric, quota_window, window_start)
      ON l.customer_id = s.customer_id AND l.metric = s.metric
     AND l.quota_window = s.quota_window AND l.window_start = s.window_start AND l.holder = p_holder
    ORDER BY l.customer_id, l.metric, quotad_window_rank(l.quota_window), l.window_start
    FOR UPDATE OF l;
    FOR r IN
        WITH item AS (
            SELECT * FROM unnest(p_customers, p_metrics, p_windows, p_starts, p_seqs, p_unused)
                WITH ORDINALITY AS t(customer_id, metric, quota_window, window_start, seq, unused, i)
        ), cur AS MATERIALIZED (
            SELECT t.i, t.customer_id, t.metric, t.quota_window, t.window_start, t.seq, t.unused,
                   l.held, l.seq AS last_seq, l.unused AS was
            FROM item t
            LEFT JOIN LATERAL (
                SELECT l.held, l.seq, l.unused FROM counter_leases l
                WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.quota_window = t.quota_window
                  AND l.window_start = t.window_start AND l.holder = p_holder
                LIMIT 1) l ON true
        ), reported AS (
            UPDATE counter_leases l SET unused = t.unused, seq = t.seq, fenced = false
            FROM cur t
            WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.quota_window = t.quota_window
              AND l.window_start = t.window_start AND l.holder = p_holder
              AND t.held AND t.last_seq < t.seq
        )
        SELECT cur.i::integer AS i, NOT coalesce(cur.held, false) AS lost,
               coalesce(cur.held AND cur.last_seq < cur.seq AND cur.unused > cur.was, false) AS more
        FROM cur
    LOOP
        IF r.lost THEN
            RETURN NEXT r.i;
        ELSIF r.more AND p_channel IS NOT NULL THEN
            PERFORM quotad_freed(p_customers[r.i], p_metrics[r.i], p_windows[r.i], p_starts[r.i], p_channel, p_payloads[r.i]);
        END IF;
    END LOOP;
END
$$;

-- The purge's index on window_start alone could be taken, by a plan made
-- while the table was small, for a counter's lookup, and scan every counter
-- of the day for it; covering the key, it finds the one counter whichever
-- index a plan takes.
DROP INDEX usage_counters_window_start;
CREATE INDEX usage_counters_window_start ON usage_counters (window_start, customer_id, metric, quota_window);

-- These functions join a batch (a few to a thousand calls) to tables that
-- grow from nothing after a deploy, through their primary keys. Left to
-- statistics, the planner may scan a table it last saw empty (autovacuum
-- has not analyzed it yet) once per batch, which a table of thousands of
-- counters makes slower than one lookup per call: they always look up.
ALTER FUNCTION quotad_lease_all(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], bigint[], bigint[],
                                bigint[], boolean[], timestamptz[], text, text[])
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
ALTER FUNCTION quotad_settle_all(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], timestamptz[], text, text[])
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
ALTER FUNCTION quotad_report(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], text, text[])
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
ALTER FUNCTION quotad_resolve(text[], text[], text[], timestamptz[], bigint, bigint[])
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
