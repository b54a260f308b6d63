DROP FUNCTION quotad_report(text[], text[], text[], timestamptz[], bigint, bigint[]);
DROP FUNCTION quotad_settle_all(text[], text[], text[], timestamptz[], bigint, bigint[], timestamptz[]);
DROP FUNCTION quotad_recall(text, text, text, timestamptz, bigint, text, text);
DROP FUNCTION quotad_settle(text, text, text, timestamptz, bigint, bigint, timestamptz);
DROP FUNCTION quotad_lease(text, text, text, timestamptz, bigint, bigint, bigint, bigint, bigint, boolean, timestamptz, text, text);
DROP FUNCTION quotad_count_global(text, text, timestamptz, bigint);
DROP FUNCTION quotad_holder_alive(bigint);
DROP TABLE counter_leases;
