-- Back to the functions of schema 26. 27 changed only names and rules, not
-- what any function answers for a counter's windows or a holder.

-- The lease calls order by quotad_window_rank again. Their bodies are 27's
-- with that one name changed back: rewritten in place rather than restated
-- (TestNewestMigrationDownRestoresTheOneBefore checks they come back, to
-- the byte, as 26 had them). Every function loses the comment 27 gave it.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid FROM pg_proc p
        WHERE p.pronamespace = current_schema()::regnamespace
          AND p.proname IN ('quotad_add_global', 'quotad_lease_all', 'quotad_settle_all', 'quotad_report', 'quotad_resolve')
    LOOP
        EXECUTE replace(pg_get_functiondef(f), 'window_rank(', 'quotad_window_rank(');
    END LOOP;
    FOR f IN
        SELECT p.oid FROM pg_proc p JOIN pg_description d ON d.classoid = 'pg_proc'::regclass AND d.objoid = p.oid
        WHERE p.pronamespace = current_schema()::regnamespace
    LOOP
        EXECUTE format('COMMENT ON FUNCTION %s IS NULL', f);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION quotad_window_rank(p_window text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_position(ARRAY['hour', 'day', 'week', 'month', 'total'], p_window)
$$;

-- Each question about holders reads pg_locks itself again.
CREATE OR REPLACE FUNCTION quotad_holder_alive(p_holder bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 2
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND classid = (quotad_lock_class()::bigint & 4294967295)::oid
          AND objid = (p_holder & 4294967295)::oid)
$$;

CREATE OR REPLACE FUNCTION quotad_others_alive(p_holder bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 2
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND classid = (quotad_lock_class()::bigint & 4294967295)::oid
          AND objid <> (p_holder & 4294967295)::oid)
$$;

CREATE OR REPLACE FUNCTION quotad_live_holders() RETURNS oid[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN ARRAY(
        SELECT k.objid FROM pg_locks k
        WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
          AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
          AND k.classid = (quotad_lock_class()::bigint & 4294967295)::oid);
END
$$;

DROP FUNCTION quotad_holder_sessions();
