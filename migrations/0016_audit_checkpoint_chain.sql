-- A checkpoint row must extend the newest one (docs/audit-integrity.md §4). The service's role
-- may insert checkpoints, and a replayed row (an old checkpoint inserted again, or the newest
-- one twice) is well signed: the sealer would otherwise chain its next checkpoint onto it, and
-- the log could never verify again. So a new row must name the newest row's note as its `prev`
-- (the first one names none), never shrink the tree, keep the root when it keeps the size (a
-- re-signed head after a key rotation), and cover no record that is not sealed. The sealer
-- checks the same before it builds on a checkpoint (tree.loader.ts), for a row that got in
-- with this trigger disabled.

CREATE FUNCTION audit_checkpoint_extends() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  newest record;
  sealed bigint;
BEGIN
  -- The seal's advisory lock (evidence.sealer.ts, SEAL_LOCK), which the sealer's own rounds
  -- hold already (it is re-entrant): two inserts cannot both extend the same newest row.
  PERFORM pg_advisory_xact_lock(7245020);
  SELECT tree_size, root_hash, note INTO newest FROM audit_checkpoints ORDER BY id DESC LIMIT 1;
  IF NOT FOUND THEN
    IF NEW.prev_checkpoint_hash IS NOT NULL THEN
      RAISE EXCEPTION 'audit_checkpoints: the first checkpoint names no previous one'
        USING ERRCODE = 'check_violation';
    END IF;
  ELSE
    IF NEW.prev_checkpoint_hash IS DISTINCT FROM sha256(convert_to(newest.note, 'UTF8')) THEN
      RAISE EXCEPTION 'audit_checkpoints: a checkpoint must name the newest one as its prev (a replayed or reordered checkpoint?)'
        USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.tree_size < newest.tree_size THEN
      RAISE EXCEPTION 'audit_checkpoints: tree size % after %: the tree never shrinks', NEW.tree_size, newest.tree_size
        USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.tree_size = newest.tree_size AND NEW.root_hash <> newest.root_hash THEN
      RAISE EXCEPTION 'audit_checkpoints: a second root for tree size %', NEW.tree_size
        USING ERRCODE = 'check_violation';
    END IF;
  END IF;
  SELECT next_seq INTO sealed FROM audit_seal_batches ORDER BY next_seq DESC LIMIT 1;
  IF NEW.tree_size > coalesce(sealed, 0) THEN
    RAISE EXCEPTION 'audit_checkpoints: tree size % covers records that are not sealed (% are)', NEW.tree_size, coalesce(sealed, 0)
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END;
$$;

CREATE TRIGGER audit_checkpoints_extend BEFORE INSERT ON audit_checkpoints
  FOR EACH ROW EXECUTE FUNCTION audit_checkpoint_extends();
ALTER TABLE audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_extend;
