-- Witness cosignatures (docs/api.md 5.11, docs/audit-integrity.md, "Witnessing"): the C2SP
-- tlog-cosignature lines that witnesses returned for the log's checkpoints, each checked
-- (cosignature/v1, Ed25519, the key the policy names, not dated in the future) before it was
-- kept. Kept beside their checkpoint and append-only like every other piece of evidence: a
-- cosignature is a third party's statement, and nobody here may take it back or change it.
-- No foreign key: nothing may cascade into evidence (as for audit_log).
CREATE TABLE audit_cosignatures (
  checkpoint_id bigint NOT NULL,
  tree_size     bigint NOT NULL CHECK (tree_size >= 1),
  -- The witness's name and its key ID (8 hex digits), as its vkey and the line carry them.
  witness       text NOT NULL CHECK (witness ~ '^[^\s+]{1,200}$'),
  key_id        text NOT NULL CHECK (key_id ~ '^[0-9a-f]{8}$'),
  -- The timestamp the cosignature signs (seconds since the epoch, as in the line).
  cosigned_at   bigint NOT NULL CHECK (cosigned_at >= 0),
  -- The whole signature line, without its newline: `— <name> base64(key ID ‖ timestamp ‖ signature)`.
  line          text NOT NULL CHECK (line LIKE '— %' AND position(E'\n' IN line) = 0),
  received_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (checkpoint_id, witness, key_id)
);

CREATE TRIGGER audit_cosignatures_no_update BEFORE UPDATE OR DELETE ON audit_cosignatures
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_cosignatures_no_truncate BEFORE TRUNCATE ON audit_cosignatures
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
ALTER TABLE audit_cosignatures ENABLE ALWAYS TRIGGER audit_cosignatures_no_update;
ALTER TABLE audit_cosignatures ENABLE ALWAYS TRIGGER audit_cosignatures_no_truncate;

-- Each witness's state as the submitter last saw it: working state, not evidence, so it is
-- updated in place. Keyed by the witness's vkey: a new key for the same name starts afresh.
-- `known_size` is the size the witness holds as far as the log knows (its last cosignature, or
-- the size its last 409 named): the `old` of the next submission, across restarts and instances.
CREATE TABLE audit_witness_state (
  vkey               text PRIMARY KEY,
  witness            text NOT NULL,
  known_size         bigint NOT NULL DEFAULT 0 CHECK (known_size >= 0),
  last_cosigned_size bigint CHECK (last_cosigned_size >= 1),
  last_cosigned_at   timestamptz,
  last_attempt_at    timestamptz,
  last_error         text,
  last_error_at      timestamptz
);

-- Who submits to the witnesses: one instance at a time holds the lease (the submissions happen
-- outside any transaction, so the seal's transaction-level advisory lock cannot cover them).
CREATE TABLE audit_witness_lease (
  singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  holder      text,
  lease_until timestamptz
);
INSERT INTO audit_witness_lease (singleton) VALUES (true);
