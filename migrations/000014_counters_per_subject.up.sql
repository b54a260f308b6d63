-- Counters per subject. A limit may count each subject of a customer (an
-- end user, an IP address, an API key) apart, beside the customer-wide
-- limits of the same metric: a counter is named by customer, metric,
-- subject, window and start. Subject '' is the customer's own counter; every
-- counter and lease from before this migration is one.
--
-- subject comes right after metric in every key, so that what finds
-- counters by customer and metric (a reset of a metric, which resets every
-- subject's counter with the customer's) still reads a prefix of the key.
-- The order in which every call locks counters (000004) becomes customer,
-- metric, subject, window (shortest first), start: a customer's own
-- counters of a metric before its subjects'.
--
-- Every function that names a counter takes its subject (arrays of subjects
-- beside the arrays of customers and metrics); its rules are those of 000008
-- to 000010, unchanged. The forms without a subject are dropped: a binary
-- that calls them does not run on this schema.
--
-- The two primary keys and the purge's index are built anew: usage_counters
-- and counter_leases are locked while they build (a few seconds per million
-- counters), and checks that need the ledger wait meanwhile.

-- The lease rows' foreign key and the view of live leases go first: both
-- stand on the keys and columns changed below.
ALTER TABLE counter_leases DROP CONSTRAINT counter_leases_customer_id_metric_quota_window_window_star_fkey;
DROP VIEW quotad_live_leases;

ALTER TABLE usage_counters ADD COLUMN subject text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE usage_counters DROP CONSTRAINT usage_counters_pkey,
    ADD PRIMARY KEY (customer_id, metric, subject, quota_window, window_start);
-- The purge's index covers the key (see 000009).
DROP INDEX usage_counters_window_start;
CREATE INDEX usage_counters_window_start ON usage_counters (window_start, customer_id, metric, subject, quota_window);

ALTER TABLE counter_leases ADD COLUMN subject text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE counter_leases DROP CONSTRAINT counter_leases_pkey,
    ADD PRIMARY KEY (customer_id, metric, subject, quota_window, window_start, holder),
    ADD CONSTRAINT counter_leases_counter_fkey FOREIGN KEY (customer_id, metric, subject, quota_window, window_start)
        REFERENCES usage_counters (customer_id, metric, subject, quota_window, window_start) ON DELETE CASCADE;

-- The subject a reservation's estimate was counted for ('' for the
-- customer's own checks). Its windows name the counters that hold it, each
-- with its subject (see quota.ReservedWindow).
ALTER TABLE reservations ADD COLUMN subject text NOT NULL DEFAULT '';

-- quotad_live_leases are the leases whose holders run (000004), with their
-- subjects. A statement reads the advisory locks once (the sub-select is
-- evaluated once, and only if a lease is read).
CREATE VIEW quotad_live_leases AS
SELECT l.customer_id, l.metric, l.subject, l.quota_window, l.window_start, l.holder, l.unused
FROM counter_leases l
WHERE (l.holder & 4294967295)::oid = ANY ((SELECT quotad_live_holders())::oid[]);

-- The functions that name a counter, in their forms without a subject.
-- quotad_settle (000003) has had no caller since 000004.
DROP FUNCTION quotad_settle(text, text, text, timestamptz, bigint, bigint, timestamptz);
DROP FUNCTION quotad_recall(text, text, text, timestamptz, bigint, text, text);
DROP FUNCTION quotad_freed(text, text, text, timestamptz, text, text);
DROP FUNCTION quotad_lease_all(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], bigint[], bigint[],
                               bigint[], boolean[], timestamptz[], text, text[]);
DROP FUNCTION quotad_settle_all(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], timestamptz[],
                                text, text[]);
DROP FUNCTION quotad_report(text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], text, text[]);
DROP FUNCTION quotad_resolve(text[], text[], text[], timestamptz[], bigint, bigint[]);

-- quotad_recall asks the other live processes whose leases of a counter
-- hold units unused to settle them (a notification with p_payload on
-- p_channel, when there is any) and returns how many such leases there are.
CREATE FUNCTION quotad_recall(
    p_customer text, p_metric text, p_subject text, p_window text, p_start timestamptz,
    p_holder bigint, p_channel text, p_payload text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_leases integer;
BEGIN
    SELECT count(*) INTO v_leases FROM quotad_live_leases l
    WHERE l.customer_id = p_customer AND l.metric = p_metric AND l.subject = p_subject
      AND l.quota_window = p_window AND l.window_start = p_start AND l.holder <> p_holder AND l.unused > 0;
    IF v_leases > 0 THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
    RETURN v_leases;
END
$$;

-- quotad_freed clears a counter's watched mark and tells every process
-- (p_payload on p_channel) that units came back to it: called by every
-- call that gives units back, once they are back.
CREATE FUNCTION quotad_freed(
    p_customer text, p_metric text, p_subject text, p_window text, p_start timestamptz,
    p_channel text, p_payload text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE usage_counters c SET watched = false
    WHERE c.customer_id = p_customer AND c.metric = p_metric AND c.subject = p_subject
      AND c.quota_window = p_window AND c.window_start = p_start AND c.watched;
    IF FOUND THEN
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
END
$$;

-- quotad_lease_all makes, for each i, a grant of counter i (customer
-- p_customers[i], metric p_metrics[i], subject p_subjects[i], window
-- p_windows[i] from p_starts[i]): call p_seqs[i] of p_holder, p_needs[i]
-- units all or none and up to p_extras[i] more to hold within p_bounds[i],
-- the lease then reporting p_inflights[i] units in flight besides;
-- p_helds[i] says the caller believes it holds a lease there;
-- p_global_starts[i] where the granted units count in the metric's global
-- usage. It returns one row per counter: what was granted, the counter
-- after, the units other live holders report unused, whether the lease the
-- caller believed held is lost, and whether the customer or the metric is
-- gone (deleted: nothing granted, the others granted all the same). When
-- nothing is granted, other live holders are asked for their units
-- (p_payloads[i] on p_channel, unless p_channel is null), or, when none
-- holds any, the counter is marked watched. Counters are locked in the order
-- of the key, then global usage, summed by window, in its order. A batch
-- holds at most one call per counter.
--
-- A counter it creates holds its grant from its insert (000010): fresh
-- counters are told by their xmin, so it refuses to run in a transaction
-- that wrote before it. Who runs (pg_locks) is read only when a grant must
-- know what other live holders hold unused.
--
-- Its plan always looks counters and leases up by key (see 000009): left to
-- statistics, a plan made while a table was small may scan it per batch.
CREATE FUNCTION quotad_lease_all(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_bounds bigint[], p_needs bigint[], p_extras bigint[],
    p_inflights bigint[], p_helds boolean[], p_global_starts timestamptz[],
    p_channel text, p_payloads text[])
RETURNS TABLE (o_i integer, o_granted bigint, o_used bigint, o_others bigint, o_lost boolean, o_gone boolean)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    v_n integer := coalesce(array_length(p_customers, 1), 0);
    v_units bigint[] := array_fill(0::bigint, ARRAY[v_n]);
    r record;
BEGIN
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'quotad_lease_all must run in a transaction of its own';
    END IF;
    -- A counter is created only when the need alone fits, and its customer
    -- and metric exist, holding what the grant below would grant it: the
    -- need and the extra, within the bound; nothing if the caller believes
    -- it holds a lease there (lost: a counter that did not exist holds no
    -- lease). The arrays' text has the database's collation: sorted as "C",
    -- as the key is.
    INSERT INTO usage_counters (customer_id, metric, subject, quota_window, window_start, used)
    SELECT s.customer_id, s.metric, s.subject, s.quota_window, s.window_start,
           CASE WHEN s.held THEN 0 ELSE LEAST(s.need + s.extra, s.bound) END
    FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts, p_needs, p_bounds, p_extras, p_helds)
        AS s(customer_id, metric, subject, quota_window, window_start, need, bound, extra, held)
    WHERE s.need <= s.bound
      AND EXISTS (SELECT 1 FROM customers u WHERE u.id = s.customer_id)
      AND EXISTS (SELECT 1 FROM metrics m WHERE m.key = s.metric)
    ORDER BY s.customer_id COLLATE "C", s.metric COLLATE "C", s.subject COLLATE "C",
             quotad_window_rank(s.quota_window), s.window_start
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, c.subject, quotad_window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    -- Every grant at once: each counter is its own (one call per counter),
    -- so no grant depends on another. The counters are locked; the
    -- statement sees them as they are now.
    FOR r IN
        WITH item AS (
            SELECT * FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts, p_seqs, p_bounds, p_needs,
                                 p_extras, p_inflights, p_helds)
                WITH ORDINALITY AS t(customer_id, metric, subject, quota_window, window_start, seq, bound, need,
                                     extra, inflight, held, i)
        ), cur AS MATERIALIZED (
            -- A fresh counter (created above) is judged as it was before
            -- its insert: empty. Its grant is in it already.
            SELECT t.*, CASE WHEN c.xmin = pg_current_xact_id()::xid THEN 0 ELSE c.used END AS used,
                   coalesce(c.xmin = pg_current_xact_id()::xid, false) AS fresh,
                   c.watched, c.customer_id IS NOT NULL AS counted,
                   l.seq AS last_seq, coalesce(l.held, false) AS holding
            FROM item t
            LEFT JOIN usage_counters c
              ON c.customer_id = t.customer_id AND c.metric = t.metric AND c.subject = t.subject
             AND c.quota_window = t.quota_window AND c.window_start = t.window_start
            -- One lookup per call, by the whole key (joined, the holder's
            -- every lease may be scanned for it).
            LEFT JOIN LATERAL (
                SELECT l.seq, l.held FROM counter_leases l
                WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.subject = t.subject
                  AND l.quota_window = t.quota_window AND l.window_start = t.window_start AND l.holder = p_holder
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
            WHERE c.customer_id = d.customer_id AND c.metric = d.metric AND c.subject = d.subject
              AND c.quota_window = d.quota_window AND c.window_start = d.window_start AND d.granted > 0
              AND NOT d.fresh
        ), leased AS (
            INSERT INTO counter_leases AS l (customer_id, metric, subject, quota_window, window_start, holder,
                                             unused, seq, granted, held, fenced)
            SELECT d.customer_id, d.metric, d.subject, d.quota_window, d.window_start, p_holder,
                   d.granted - d.need + d.inflight, d.seq, d.granted, true, false
            FROM decided d WHERE d.granted > 0
            ON CONFLICT (customer_id, metric, subject, quota_window, window_start, holder)
            DO UPDATE SET unused = EXCLUDED.unused, seq = EXCLUDED.seq, granted = EXCLUDED.granted,
                          held = true, fenced = false
        )
        SELECT d.i::integer AS i, d.granted, coalesce(d.used, 0) + d.granted AS used_after,
               CASE WHEN d.asked THEN (
                   SELECT coalesce(sum(l.unused), 0) FROM counter_leases l
                   WHERE l.customer_id = d.customer_id AND l.metric = d.metric AND l.subject = d.subject
                     AND l.quota_window = d.quota_window AND l.window_start = d.window_start
                     AND l.holder <> p_holder AND l.unused > 0
                     AND (l.holder & 4294967295)::oid = ANY ((SELECT quotad_live_holders())::oid[]))
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
            WHERE c.customer_id = p_customers[r.i] AND c.metric = p_metrics[r.i] AND c.subject = p_subjects[r.i]
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

-- quotad_settle_all ends many leases of p_holder at once, the one of
-- counter i in call p_seqs[i]: the p_unused[i] units it held unused are no
-- longer counted, in the counter nor in the metric's global usage
-- (p_global_starts[i] as in quotad_lease_all). A lease the store no longer
-- holds (a reset ended it, with its units), or holds by a later call, gives
-- nothing back. It locks the counters first, in the order of the key, then
-- global usage. Where units came back to a watched counter, p_payloads[i]
-- goes out on p_channel. Its transaction commits without waiting for the
-- disk: a settlement lost in a crash of PostgreSQL only leaves units
-- counted that were not used. So it runs in a transaction of its own.
CREATE FUNCTION quotad_settle_all(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_unused bigint[], p_global_starts timestamptz[],
    p_channel text, p_payloads text[]) RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    v_n integer := coalesce(array_length(p_customers, 1), 0);
    v_back bigint[] := array_fill(0::bigint, ARRAY[v_n]);
    r record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, c.subject, quotad_window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    FOR r IN
        WITH item AS (
            SELECT * FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts, p_seqs, p_unused)
                WITH ORDINALITY AS t(customer_id, metric, subject, quota_window, window_start, seq, unused, i)
        ), settled AS (
            -- Only a lease the store holds, and not by a later call.
            UPDATE counter_leases l SET held = false, unused = 0, granted = 0, seq = t.seq, fenced = false
            FROM item t
            WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.subject = t.subject
              AND l.quota_window = t.quota_window AND l.window_start = t.window_start AND l.holder = p_holder
              AND l.held AND l.seq < t.seq
            RETURNING t.i, t.customer_id, t.metric, t.subject, t.quota_window, t.window_start, t.unused
        ), back AS MATERIALIZED (
            SELECT s.i, s.customer_id, s.metric, s.subject, s.quota_window, s.window_start,
                   LEAST(s.unused, c.used) AS units, c.watched
            FROM settled s
            JOIN usage_counters c
              ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
             AND c.quota_window = s.quota_window AND c.window_start = s.window_start
        ), given AS (
            UPDATE usage_counters c SET used = c.used - b.units, watched = c.watched AND b.units = 0
            FROM back b
            WHERE c.customer_id = b.customer_id AND c.metric = b.metric AND c.subject = b.subject
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

-- quotad_report records, in call p_seqs[i], that p_holder holds p_unused[i]
-- units unused in its lease of counter i, and returns the positions (from
-- 1) of the leases the store no longer holds. A lease reported to hold
-- more than before makes units recallable: a watched counter is told, as
-- by a settlement. Like quotad_settle_all, its transaction commits without
-- waiting for the disk, so it runs in one of its own.
CREATE FUNCTION quotad_report(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_unused bigint[], p_channel text, p_payloads text[])
RETURNS SETOF integer
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    r record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    -- The leases are locked first, in the counters' order (a report locks
    -- no counter).
    PERFORM 1 FROM counter_leases l
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON l.customer_id = s.customer_id AND l.metric = s.metric AND l.subject = s.subject
     AND l.quota_window = s.quota_window AND l.window_start = s.window_start AND l.holder = p_holder
    ORDER BY l.customer_id, l.metric, l.subject, quotad_window_rank(l.quota_window), l.window_start
    FOR UPDATE OF l;
    FOR r IN
        WITH item AS (
            SELECT * FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts, p_seqs, p_unused)
                WITH ORDINALITY AS t(customer_id, metric, subject, quota_window, window_start, seq, unused, i)
        ), cur AS MATERIALIZED (
            SELECT t.i, t.customer_id, t.metric, t.subject, t.quota_window, t.window_start, t.seq, t.unused,
                   l.held, l.seq AS last_seq, l.unused AS was
            FROM item t
            LEFT JOIN LATERAL (
                SELECT l.held, l.seq, l.unused FROM counter_leases l
                WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.subject = t.subject
                  AND l.quota_window = t.quota_window AND l.window_start = t.window_start AND l.holder = p_holder
                LIMIT 1) l ON true
        ), reported AS (
            UPDATE counter_leases l SET unused = t.unused, seq = t.seq, fenced = false
            FROM cur t
            WHERE l.customer_id = t.customer_id AND l.metric = t.metric AND l.subject = t.subject
              AND l.quota_window = t.quota_window AND l.window_start = t.window_start AND l.holder = p_holder
              AND t.held AND t.last_seq < t.seq
        )
        SELECT cur.i::integer AS i, NOT coalesce(cur.held, false) AS lost,
               coalesce(cur.held AND cur.last_seq < cur.seq AND cur.unused > cur.was, false) AS more
        FROM cur
    LOOP
        IF r.lost THEN
            RETURN NEXT r.i;
        ELSIF r.more AND p_channel IS NOT NULL THEN
            PERFORM quotad_freed(p_customers[r.i], p_metrics[r.i], p_subjects[r.i], p_windows[r.i], p_starts[r.i],
                                 p_channel, p_payloads[r.i]);
        END IF;
    END LOOP;
END
$$;

-- quotad_resolve tells p_holder whether its call p_seqs[i] on its lease of
-- counter i was applied, for calls whose answer it never got, and fences
-- off those that were not: a copy arriving later changes nothing. Asked
-- again (its answer lost too), it answers the same. For each counter it
-- returns its position (from 1), whether the call was applied, and the
-- lease as the store holds it now: held, its unused units, and what the
-- call granted if it was a grant that was applied. A fence needs the
-- lease's row, and a row needs its counter's: it creates them where they
-- are missing (the counter at 0, the lease not held), unless the customer
-- or metric is gone.
CREATE FUNCTION quotad_resolve(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[])
RETURNS TABLE (o_i integer, o_applied boolean, o_held boolean, o_unused bigint, o_granted bigint)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    v_seq bigint;
    v_held boolean;
    v_unused bigint;
    v_granted bigint;
    v_fenced boolean;
BEGIN
    INSERT INTO usage_counters (customer_id, metric, subject, quota_window, window_start, used)
    SELECT s.customer_id, s.metric, s.subject, s.quota_window, s.window_start, 0
    FROM unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
    WHERE EXISTS (SELECT 1 FROM customers u WHERE u.id = s.customer_id)
      AND EXISTS (SELECT 1 FROM metrics m WHERE m.key = s.metric)
    ORDER BY s.customer_id COLLATE "C", s.metric COLLATE "C", s.subject COLLATE "C",
             quotad_window_rank(s.quota_window), s.window_start
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, c.subject, quotad_window_rank(c.quota_window), c.window_start
    FOR UPDATE OF c;
    FOR i IN 1 .. coalesce(array_length(p_customers, 1), 0) LOOP
        SELECT l.seq, l.held, l.unused, l.granted, l.fenced INTO v_seq, v_held, v_unused, v_granted, v_fenced
        FROM counter_leases l
        WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.subject = p_subjects[i]
          AND l.quota_window = p_windows[i] AND l.window_start = p_starts[i] AND l.holder = p_holder;
        IF FOUND AND v_seq = p_seqs[i] AND NOT v_fenced THEN
            o_i := i; o_applied := true; o_held := v_held; o_unused := v_unused; o_granted := v_granted;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF FOUND AND v_seq < p_seqs[i] THEN
            UPDATE counter_leases l SET seq = p_seqs[i], fenced = true
            WHERE l.customer_id = p_customers[i] AND l.metric = p_metrics[i] AND l.subject = p_subjects[i]
              AND l.quota_window = p_windows[i] AND l.window_start = p_starts[i] AND l.holder = p_holder;
        ELSIF NOT FOUND THEN
            INSERT INTO counter_leases (customer_id, metric, subject, quota_window, window_start, holder,
                                        unused, seq, granted, held, fenced)
            SELECT c.customer_id, c.metric, c.subject, c.quota_window, c.window_start, p_holder, 0, p_seqs[i], 0,
                   false, true
            FROM usage_counters c
            WHERE c.customer_id = p_customers[i] AND c.metric = p_metrics[i] AND c.subject = p_subjects[i]
              AND c.quota_window = p_windows[i] AND c.window_start = p_starts[i];
        END IF;
        o_i := i; o_applied := false; o_held := coalesce(v_held, false); o_unused := coalesce(v_unused, 0);
        o_granted := 0;
        RETURN NEXT;
    END LOOP;
END
$$;
