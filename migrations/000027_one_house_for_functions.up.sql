-- The functions of the schema, all of them, as the current protocol: this
-- file states each as it stands from schema 27, in the order a reader needs
-- them (windows, holders, global usage, the lease calls, object counts),
-- each with its role in a comment on the function (psql's \df+ shows it,
-- and so does internal/store/schema.sql). Before it, the lease rules could
-- be read only by replaying migrations 1 to 26.
--
-- What changes: one rank of windows (window_rank) for the catalog and the
-- lease calls' order of locks, and one rule for "this holder runs"
-- (quotad_holder_sessions), which the three questions about holders ask.
-- Every other body is the one it was, to the byte. No function was dead:
-- quotad_settle went in 14, and quotad_holder_alive is the reclaim's
-- question since 16. Processes of schema 26 go on running on this one (a
-- rolling upgrade): every function they call keeps its name, signature and
-- answers.
--
-- Why a migration, and not a file of functions applied after the
-- migrations: the schema version stays the whole truth about a database.
-- A migration applies in the transaction that moves the version, so a
-- database at 27 has exactly these functions, whoever migrated it (quotad
-- at start-up, quotad migrate up, or golang-migrate's own command), a
-- process started with --no-migrate can trust the version it reads
-- (nothing is left for it to apply), a crash cannot leave the version moved
-- and the functions not, and a down migration restores the functions of the
-- version before, as every down does. A file applied after the migrations
-- would let two binaries of one schema version disagree on the functions,
-- and a --no-migrate process could not tell.
--
-- Migrations 3 to 26 keep the bodies they had: a database migrated to any
-- of those versions (a rollback goes there with quotad migrate down) must
-- hold what a quotad of that version calls. A later change to a function is
-- a migration that restates it; internal/store/schema.sql always shows
-- every function as the migrations leave it (see docs/operations.md).

-- Windows --------------------------------------------------------------------

-- Unchanged since 20.
CREATE OR REPLACE FUNCTION window_rank(w text) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN array_position(ARRAY['second', 'minute', 'hour', 'day', 'week', 'month', 'total'], w)::smallint;
COMMENT ON FUNCTION window_rank(text) IS
    'The rank of a window, shortest first (second 1 ... total 7), as tiers.Windows orders them: keyset pages of overrides compare with it, and every call locks counters (by customer, metric, subject, window, start) and then global usage (by metric, window, start) in its order of windows, so that none waits for another that waits for it.';

-- quotad_window_rank ranked the windows a counter may have; the lease calls
-- now order by window_rank, in the same order. Processes of schema 26 still
-- order counters by it (a reset, a reclaim), so it stays, with their ranks,
-- until a later migration that is not safe to roll for reasons of its own
-- drops it.
CREATE OR REPLACE FUNCTION quotad_window_rank(p_window text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN window_rank(p_window) > 2 THEN window_rank(p_window) - 2 END
$$;
COMMENT ON FUNCTION quotad_window_rank(text) IS
    'Kept for processes of schema 26 only: window_rank among the windows a counter may have (hour 1 ... total 5, null for others).';

-- Holders --------------------------------------------------------------------

CREATE OR REPLACE FUNCTION quotad_lock_class() RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT hashtext('quotad:' || current_schema())
$$;
COMMENT ON FUNCTION quotad_lock_class() IS
    'The first key of every holder''s advisory lock: this schema''s, so that the processes of two schemas of one database do not see each other.';

-- A lock of two int4 keys is filed in pg_locks as classid (the first, as an
-- unsigned oid), objid (the second), objsubid 2. Session locks of an
-- exclusive key: a holder's lock shows once, with the process that holds it.
CREATE FUNCTION quotad_holder_sessions() RETURNS TABLE (o_holder oid, o_pid integer)
LANGUAGE sql STABLE AS $$
    SELECT k.objid, k.pid FROM pg_locks k
    WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
      AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
      AND k.classid = (quotad_lock_class()::bigint & 4294967295)::oid
$$;
COMMENT ON FUNCTION quotad_holder_sessions() IS
    'The rule of who runs: a process runs while it holds, on a session of its own, the advisory lock (quotad_lock_class(), its holder key), which PostgreSQL releases when the process or its connection dies. One row per running holder: its key as an oid (a holder bigint h is (h & 4294967295)::oid) and the backend that holds the lock.';

-- PL/pgSQL, so that its statement is planned once per session.
CREATE OR REPLACE FUNCTION quotad_live_holders() RETURNS oid[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN ARRAY(SELECT k.o_holder FROM quotad_holder_sessions() k);
END
$$;
COMMENT ON FUNCTION quotad_live_holders() IS
    'The keys of the running holders (quotad_holder_sessions), read once per statement: the view quotad_live_leases, quotad_lease_all and the list of holders compare leases'' holders with it.';

CREATE OR REPLACE FUNCTION quotad_holder_alive(p_holder bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM quotad_holder_sessions() k WHERE k.o_holder = (p_holder & 4294967295)::oid)
$$;
COMMENT ON FUNCTION quotad_holder_alive(bigint) IS
    'Whether holder p_holder runs (quotad_holder_sessions): a holder that does not is dead, and its leases may be reclaimed.';

CREATE OR REPLACE FUNCTION quotad_others_alive(p_holder bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM quotad_holder_sessions() k WHERE k.o_holder <> (p_holder & 4294967295)::oid)
$$;
COMMENT ON FUNCTION quotad_others_alive(bigint) IS
    'Whether any holder other than p_holder runs on this schema (quotad_holder_sessions): when none does, no lease of another process can be recalled.';

-- Global usage ---------------------------------------------------------------

-- Units are added to one of 16 shards at random, so that grants of one
-- metric do not all wait for one row.
CREATE OR REPLACE FUNCTION quotad_count_global(p_metric text, p_window text, p_start timestamptz, p_units bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_units = 0 THEN
        RETURN;
    ELSIF p_units > 0 THEN
        INSERT INTO metric_usage AS g (metric, quota_window, window_start, shard, used)
        VALUES (p_metric, p_window, p_start, floor(random() * 16)::smallint, p_units)
        ON CONFLICT (metric, quota_window, window_start, shard) DO UPDATE SET used = g.used + EXCLUDED.used;
        RETURN;
    END IF;
    -- Each shard gives what is left to take once the fuller ones gave
    -- theirs, at most all it has.
    WITH s AS MATERIALIZED (
        SELECT g.shard, g.used FROM metric_usage g
        WHERE g.metric = p_metric AND g.quota_window = p_window AND g.window_start = p_start AND g.used > 0
        ORDER BY g.shard
        FOR UPDATE
    ), t AS (
        SELECT s.shard, LEAST(s.used, -p_units - (sum(s.used) OVER (ORDER BY s.used DESC, s.shard) - s.used)) AS took
        FROM s
    )
    UPDATE metric_usage g SET used = g.used - t.took
    FROM t
    WHERE g.metric = p_metric AND g.quota_window = p_window AND g.window_start = p_start
      AND g.shard = t.shard AND t.took > 0;
END
$$;
COMMENT ON FUNCTION quotad_count_global(text, text, timestamptz, bigint) IS
    'Adds p_units to a metric''s global usage in one window (metric_usage), or takes them off when negative: from the fullest shard first, never below zero, the window''s shards locked in shard order.';

CREATE OR REPLACE FUNCTION quotad_add_global(p_metrics text[], p_windows text[], p_starts timestamptz[], p_units bigint[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    d record;
BEGIN
    FOR d IN
        SELECT u.metric, u.quota_window, u.window_start, sum(u.units)::bigint AS units
        FROM unnest(p_metrics, p_windows, p_starts, p_units) AS u(metric, quota_window, window_start, units)
        WHERE u.units <> 0
        GROUP BY u.metric, u.quota_window, u.window_start
        HAVING sum(u.units) <> 0
        ORDER BY u.metric COLLATE "C", window_rank(u.quota_window), u.window_start
    LOOP
        PERFORM quotad_count_global(d.metric, d.quota_window, d.window_start, d.units);
    END LOOP;
END
$$;
COMMENT ON FUNCTION quotad_add_global(text[], text[], timestamptz[], bigint[]) IS
    'Adds units to metrics'' global usage, summed by window, the windows in the order of locks (metric, window_rank, start), after the counters: the lease calls and the ledger''s charges and give-backs count global usage through it.';

-- Leases ---------------------------------------------------------------------
--
-- A lease is a block of a counter's units a process (its holder) reserves
-- with one conditional update, then admits checks from in memory. A
-- counter's used counts every unit granted, admitted or held unused in
-- leases, so a window stays within its bound however many processes hold
-- leases. Every call a holder makes on a lease (a grant, a report, a
-- settlement) carries a sequence number, increasing within the holder; the
-- lease row keeps the last one applied, so a late copy of a call changes
-- nothing, and quotad_resolve tells a holder what a call whose answer it
-- lost did. A settled lease keeps its row (held false) until its counter
-- goes, so that the fence outlives the lease. A batch holds at most one
-- call per counter, so no call of it depends on another: each batch is
-- decided as one set.
--
-- Every call locks counters first, in the order of the key (customer,
-- metric, subject, window_rank, start), then global usage; quotad_report
-- locks leases, in the same order, and no counter.
--
-- The batch functions always look counters and leases up by key (their SET
-- clauses): left to statistics, a plan made while a table was small (after
-- a deploy, before autovacuum) may scan it once per batch.

-- A counter it creates holds its grant from its insert: an update after
-- the insert would make PostgreSQL check the new row's foreign keys again.
-- Fresh counters are told by their xmin, so it refuses to run in a
-- transaction that wrote before it. Who runs (pg_locks) is read only when a
-- grant must know what other live holders hold unused.
CREATE OR REPLACE FUNCTION quotad_lease_all(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_bounds bigint[], p_needs bigint[], p_extras bigint[],
    p_inflights bigint[], p_helds boolean[], p_global_starts timestamptz[], p_channel text, p_payloads text[])
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
             window_rank(s.quota_window), s.window_start
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, c.subject, window_rank(c.quota_window), c.window_start
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
COMMENT ON FUNCTION quotad_lease_all(text[], text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], bigint[],
                                     bigint[], bigint[], boolean[], timestamptz[], text, text[]) IS
    'Grants, for each i, counter i (p_customers[i], p_metrics[i], p_subjects[i], p_windows[i] from p_starts[i]) to holder p_holder in its call p_seqs[i]: p_needs[i] units all or none and up to p_extras[i] more to hold, within p_bounds[i]; the lease then reports p_inflights[i] units in flight besides. p_helds[i]: the caller believes it holds a lease there (none held: o_lost, nothing granted). p_global_starts[i]: the granted units count in the metric''s global usage too. One row per counter: what was granted, the counter after, the units other live holders hold unused, o_lost, and o_gone (the customer or metric was deleted). When nothing is granted, the other live holders are asked for their units (p_payloads[i] on p_channel, unless null), or, when none holds any, the counter is marked watched.';

-- Its transaction commits without waiting for the disk: a settlement lost
-- in a crash of PostgreSQL only leaves units counted that were not used.
-- So it runs in a transaction of its own.
CREATE OR REPLACE FUNCTION quotad_settle_all(
    p_customers text[], p_metrics text[], p_subjects text[], p_windows text[], p_starts timestamptz[],
    p_holder bigint, p_seqs bigint[], p_unused bigint[], p_global_starts timestamptz[], p_channel text,
    p_payloads text[])
RETURNS void
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
    ORDER BY c.customer_id, c.metric, c.subject, window_rank(c.quota_window), c.window_start
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
COMMENT ON FUNCTION quotad_settle_all(text[], text[], text[], text[], timestamptz[], bigint, bigint[], bigint[],
                                      timestamptz[], text, text[]) IS
    'Ends p_holder''s leases of counters i in its calls p_seqs[i]: the p_unused[i] units each held unused come off the counter (and off the metric''s global usage where p_global_starts[i]). A lease the store no longer holds (a reset ended it, with its units), or one a later call already decided, gives nothing back. Where units came back to a watched counter, p_payloads[i] goes out on p_channel.';

-- Like quotad_settle_all, its transaction commits without waiting for the
-- disk, so it runs in one of its own.
CREATE OR REPLACE FUNCTION quotad_report(
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
    ORDER BY l.customer_id, l.metric, l.subject, window_rank(l.quota_window), l.window_start
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
COMMENT ON FUNCTION quotad_report(text[], text[], text[], text[], timestamptz[], bigint, bigint[], bigint[], text,
                                  text[]) IS
    'Records, in call p_seqs[i], that p_holder holds p_unused[i] units unused in its lease of counter i, and returns the positions (from 1) of the leases the store no longer holds. A lease reported to hold more than before makes units recallable: a watched counter is told (quotad_freed).';

CREATE OR REPLACE FUNCTION quotad_freed(
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
COMMENT ON FUNCTION quotad_freed(text, text, text, text, timestamptz, text, text) IS
    'Clears a counter''s watched mark and, if it was set, tells every process (p_payload on p_channel) that units came back to it: every call that gives units back calls it once they are back.';

CREATE OR REPLACE FUNCTION quotad_recall(
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
COMMENT ON FUNCTION quotad_recall(text, text, text, text, timestamptz, bigint, text, text) IS
    'Asks the other live holders whose leases of a counter hold units unused to settle them (p_payload on p_channel, when there is any such lease), and returns how many such leases there are.';

-- A fence needs the lease's row, and a row needs its counter's: it creates
-- them where they are missing (the counter at 0, the lease not held),
-- unless the customer or metric is gone.
CREATE OR REPLACE FUNCTION quotad_resolve(
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
             window_rank(s.quota_window), s.window_start
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM usage_counters c
    JOIN unnest(p_customers, p_metrics, p_subjects, p_windows, p_starts)
        AS s(customer_id, metric, subject, quota_window, window_start)
      ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
     AND c.quota_window = s.quota_window AND c.window_start = s.window_start
    ORDER BY c.customer_id, c.metric, c.subject, window_rank(c.quota_window), c.window_start
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
COMMENT ON FUNCTION quotad_resolve(text[], text[], text[], text[], timestamptz[], bigint, bigint[]) IS
    'Tells p_holder whether its call p_seqs[i] on its lease of counter i, whose answer it never got, was applied, and fences off one that was not: a copy arriving later changes nothing, and asked again it answers the same. One row per counter: whether the call was applied, and the lease as the store holds it now (held, unused units, and what the call granted if it was an applied grant).';

-- Object counts --------------------------------------------------------------

CREATE OR REPLACE FUNCTION quotad_count_objects() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE object_counts
    SET n = CASE TG_OP WHEN 'INSERT' THEN n + 1 WHEN 'DELETE' THEN n - 1 ELSE 0 END
    WHERE kind = TG_TABLE_NAME;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION quotad_count_objects() IS
    'The trigger that keeps object_counts: the rows of the table it is on (customers, webhooks), by its name, in the writing transaction, so that the caps on them are checked without counting a table.';
