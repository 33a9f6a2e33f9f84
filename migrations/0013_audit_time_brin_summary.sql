-- Summaries for the block ranges of audit_log_time_brin (migrations/0012) that filled since it was
-- built. A range without a summary is read whole by every id-ceiling lookup (docs/audit-search.md,
-- "Old created windows"); autovacuum summarizes filled ranges (autosummarize), but PGlite runs no
-- autovacuum and a PostgreSQL may run without it. The service calls this from its maintenance
-- loop (src/ops/maintenance.ts).
--
-- SECURITY DEFINER: summarizing needs the index's owner, and the service runs as teamlog_app,
-- which owns nothing. So the function does one thing, with nothing taken from the caller, and
-- with a search_path of pg_catalog and pg_temp only (pg_temp last, so that no temporary object
-- can stand in for one of these names) and the table and index named with their schema. EXECUTE
-- is taken from PUBLIC here; R__privileges.sql gives it to teamlog_app (on PostgreSQL; PGlite has
-- no such role, the owner calls it).
--
-- Filled ranges only, newest first, down to the first one that already has a summary: not
-- brin_summarize_new_values, which also summarizes the range being filled, whose summary every
-- later insert into it would then widen (a BRIN write per audited write, and its WAL, until the
-- range fills: docs/audit-search.md). Ranges fill in order and each summary below the newest is
-- made by this function, by autosummarize or by a VACUUM, so the ranges under the first summarized
-- one have theirs (but one whose autosummarize request was lost, which waits for a VACUUM, as
-- before). A range is taken as filled when the table's last page lies above it; PostgreSQL may
-- extend a table by several pages at once under concurrent inserts, and the few records that land
-- in a range after its summary then widen it, as after autosummarize.
--
-- The lock that summarizing takes (SHARE UPDATE EXCLUSIVE on the table) is asked for without
-- waiting: a VACUUM of the table holds it (and summarizes), another instance may be summarizing,
-- and waiting behind an autovacuum would make PostgreSQL cancel that autovacuum. Then the answer
-- is null, and the next round tries again. Otherwise: the number of ranges summarized.
CREATE FUNCTION audit_summarize_time_index() RETURNS integer
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  pages_per_range constant bigint := 32; -- as audit_log_time_brin was made (migrations/0012)
  pages bigint;
  summarized integer := 0;
  n integer;
BEGIN
  LOCK TABLE public.audit_log IN SHARE UPDATE EXCLUSIVE MODE NOWAIT;
  pages := pg_relation_size('public.audit_log'::regclass) / current_setting('block_size')::bigint;
  -- The ranges that lie wholly below the table's last page, newest first.
  FOR r IN REVERSE ((pages - 1) / pages_per_range) - 1 .. 0 LOOP
    n := brin_summarize_range('public.audit_log_time_brin'::regclass, r * pages_per_range);
    EXIT WHEN n = 0;
    summarized := summarized + n;
  END LOOP;
  RETURN summarized;
EXCEPTION WHEN lock_not_available THEN
  RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION audit_summarize_time_index() FROM PUBLIC;
