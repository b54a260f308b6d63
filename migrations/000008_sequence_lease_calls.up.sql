-- Lease calls that survive a lost answer, and counters that tell when
-- units come back.
--
-- Every call a holder makes on its lease of a counter (a grant, a report,
-- a settlement) carries a sequence number, increasing within the holder;
-- the lease row keeps the number of the last call applied to it. A call
-- arrives once: one whose number is not above the row's is a late copy of
-- a call already decided, and changes nothing. When the answer to a call
-- is lost (a reset connection, a timeout), the holder asks quotad_resolve
-- whether that call was applied, which also fences it off: a copy that
-- arrives later changes nothing. So a holder always learns what its calls
-- did, and no unit is left counted that no one holds.
--
-- A settled lease keeps its row (held false, nothing unused) until its
-- counter goes, so that the fence outlives the lease.

ALTER TABLE counter_leases
    ADD COLUMN seq bigint NOT NULL DEFAULT 0,
    -- What the call numbered seq granted, if it was a grant.
    ADD COLUMN granted bigint NOT NULL DEFAULT 0 CHECK (granted >= 0),
    -- true: seq is a call that quotad_resolve fenced off, not one applied.
    ADD COLUMN fenced boolean NOT NULL DEFAULT false,
    -- false: the holder holds no lease here (it settled, or its call was
    -- fenced off before it made one); the row only keeps seq.
    ADD COLUMN held boolean NOT NULL DEFAULT true;

-- watched: a process was refused a grant of this counter while no other
-- live process held units of it unused, and refuses checks from memory
-- since. The first call that gives units back (a settlement, a report of
-- more unused units, a refund) tells every process, and clears it.
ALTER TABLE usage_counters ADD COLUMN watched boolean NOT NULL DEFAULT false;

-- quotad_recall counts only leases that hold units.
CREATE OR REPLACE FUNCTION quotad_recall(
    p_customer text, p_metric text, p_window text, p_start timestamptz,
    p_holder bigint, p_channel text, p_payload text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_leases integer;
BEGIN
    SELECT count(*) INTO v_leases FROM quotad_live_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.quota_window = p_window
      AND l.window_start = p_start AND l.holder <> p_holder AND l.unused > 0;
    IF v_leases > 0 THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
    RETURN v_leases;
END
$$;

DROP FUNCTION quotad_lease(text, text, text, timestamptz, bigint, bigint, bigint, bigint, bigint,
                           boolean, timestamptz, text, text);
DROP FUNCTION quotad_settle_all(text[], text[], text[], timestamptz[], bigint, bigint[], timestamptz[]);
DROP FUNCTION quotad_report(text[], text[], text[], timestamptz[], bigint, bigint[]);

-- quotad_lease grants p_holder, in its call p_seq, p_need units of a
-- counter and up to p_extra more to hold, if the counter stays within
-- p_bound; it never grants part of p_need. The lease then reports what it
-- holds unused: the units granted beyond p_need, and p_inflight more
-- (units its checks in progress took and may yet put back). Where the
-- metric declares a capacity for the window (p_global_start, else null),
-- the granted units count in its global usage at once. It returns what it
-- granted, the counter after, and the units other live holders report
-- holding unused.
--
-- When nothing is granted: if other live holders hold units unused, they
-- are asked to give them back (a notification with p_payload on
-- p_channel, unless p_channel is null); if none does, the counter is
-- marked watched (see usage_counters.watched).
--
-- p_held says the caller believes it holds a lease here. When the store
-- holds none (a reset or the customer's deletion ended it, with its
-- units), o_lost is true and nothing is granted.
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

-- quotad_freed clears a counter's watched mark and tells every process
-- (p_payload on p_channel) that units came back to it: called by every
-- call that gives units back, once they are back.
CREATE FUNCTION quotad_freed(
    p_customer text, p_metric text, p_window text, p_start timestamptz, p_channel text, p_payload text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE usage_counters c SET watched = false
    WHERE c.customer_id = p_customer AND c.metric = p_metric
      AND c.quota_window = p_window AND c.window_start = p_start AND c.watched;
    IF FOUND THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
END
$$;

-- quotad_settle_all ends many leases of p_holder at once, the one of
-- counter i in call p_seqs[i]: the p_unused[i] units it held unused are no
-- longer counted, in the counter nor in the metric's global usage
-- (p_global_starts[i] as in quotad_lease). A lease the store no longer
-- holds (a reset ended it, with its units) gives nothing back. It locks
-- the counters first, in the order of 000004, then global usage. Where
-- units came back to a watched counter, p_payloads[i] goes out on
-- p_channel. Its transaction commits without waiting for the disk: a
-- settlement lost in a crash of PostgreSQL only leaves units counted that
-- were not used. So it runs in a transaction of its own.
CREATE FUNCTION quotad_settle_all(
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

-- quotad_report records, in call p_seqs[i], that p_holder holds p_unused[i]
-- units unused in its lease of counter i, and returns the positions (from
-- 1) of the leases the store no longer holds. A lease reported to hold
-- more than before makes units recallable: a watched counter is told, as
-- by a settlement. Like quotad_settle_all, its transaction commits without
-- waiting for the disk, so it runs in one of its own.
CREATE FUNCTION quotad_report(
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

-- quotad_resolve tells p_holder whether its call p_seqs[i] on its lease of
-- counter i was applied, for calls whose answer it never got, and fences
-- off those that were not: a copy arriving later changes nothing. Asked
-- again (its answer lost too), it answers the same. For
-- each counter it returns its position (from 1), whether the call was
-- applied, and the lease as the store holds it now: held, its unused
-- units, and what the call granted if it was a grant that was applied.
-- A fence needs the lease's row, and a row needs its counter's: it
-- creates them where they are missing (the counter at 0, the lease not
-- held), unless the customer or metric is gone.
CREATE FUNCTION quotad_resolve(
    p_customers text[], p_metrics text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[])
RETURNS TABLE (o_i integer, o_applied boolean, o_held boolean, o_unused bigint, o_granted bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_seq bigint;
    v_held boolean;
    v_unused bigint;
    v_granted bigint;
    v_fenced boolean;
BEGIN
    INSERT INTO usage_counters (customer_id, metric, quota_window, window_start, used)
    SELECT s.customer_id, s.metric, s.quota_window, s.window_start, 0
    FROM unnest(p_customers, p_metrics, p_windows, p_starts) AS s(customer_id, metric, quota_window, window_start)
    WHERE EXISTS (SELECT 1 FROM customers u WHERE u.id = s.customer_id)
      AND EXISTS (SELECT 1 FROM metrics m WHERE m.key = s.metric)
    ORDER BY s.customer_id COLLATE "C", s.metric COLLATE "C", quotad_window_rank(s.quota_window), s.window_start
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_windows, p_starts) AS s(customer_id, metric, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, quotad_window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    FOR i IN 1 .. coalesce(array_length(p_customers, 1), 0) LOOP
        SELECT l.seq, l.held, l.unused, l.granted, l.fenced INTO v_seq, v_held, v_unused, v_granted, v_fenced
        FROM counter_leases l
        WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.quota_window = p_windows[i]
          AND l.window_start = p_starts[i] AND l.holder = p_holder;
        IF FOUND AND v_seq = p_seqs[i] AND NOT v_fenced THEN
            o_i := i; o_applied := true; o_held := v_held; o_unused := v_unused; o_granted := v_granted;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF FOUND AND v_seq < p_seqs[i] THEN
            UPDATE counter_leases l SET seq = p_seqs[i], fenced = true
            WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.quota_window = p_windows[i]
              AND l.window_start = p_starts[i] AND l.holder = p_holder;
        ELSIF NOT FOUND THEN
            INSERT INTO counter_leases (customer_id, metric, quota_window, window_start, holder,
                                        unused, seq, granted, held, fenced)
            SELECT c.customer_id, c.metric, c.quota_window, c.window_start, p_holder, 0, p_seqs[i], 0, false, true
            FROM usage_counters c
            WHERE c.customer_id = p_customers[i] AND c.metric = p_metrics[i]
              AND c.quota_window = p_windows[i] AND c.window_start = p_starts[i];
        END IF;
        o_i := i; o_applied := false; o_held := coalesce(v_held, false); o_unused := coalesce(v_unused, 0); o_granted := 0;
        RETURN NEXT;
    END LOOP;
END
$$;
