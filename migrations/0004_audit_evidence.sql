-- Audit evidence (API.md 5.4–5.6, docs/audit-integrity.md): records are sealed after commit
-- into an RFC 6962 Merkle tree, in a dense sequence of their own, and the tree's head is
-- signed at intervals as a C2SP checkpoint. audit_log itself is never updated: every table
-- here is append-only too, enforced below and by the privileges (R__privileges.sql).

-- The sealer reads records in commit order, (xact_id, id), from where it stopped.
CREATE INDEX audit_log_commit_order_idx ON audit_log (xact_id, id);
DROP INDEX audit_log_xact_idx;

-- One row per sealed record: its place in the tree (seq, dense from 0) and its leaf hash,
-- SHA-256(0x00 ‖ JCS(sealed record)). record_xact_id is where the record stood in commit
-- order: the last row's (record_xact_id, record_id) is the sealer's cursor.
CREATE TABLE audit_seal (
  seq            bigint PRIMARY KEY CHECK (seq >= 0),
  -- Dense: every seq but the first has its predecessor (a position is never skipped, and the
  -- foreign key also keeps a sealed position from being removed from under its successor).
  prev_seq       bigint GENERATED ALWAYS AS (NULLIF(seq, 0) - 1) STORED REFERENCES audit_seal (seq),
  record_id      bigint NOT NULL UNIQUE,
  record_xact_id xid8 NOT NULL,
  leaf_hash      bytea NOT NULL CHECK (octet_length(leaf_hash) = 32),
  sealed_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The hash of every complete, aligned subtree of two or more leaves: level L, index i covers
-- the leaves [i·2^L, (i+1)·2^L). With them any root or proof takes O(log n) lookups.
CREATE TABLE audit_tree_nodes (
  level smallint NOT NULL CHECK (level BETWEEN 1 AND 62),
  idx   bigint NOT NULL CHECK (idx >= 0),
  hash  bytea NOT NULL CHECK (octet_length(hash) = 32),
  PRIMARY KEY (level, idx)
);

-- Every public key that ever signed a checkpoint. The private key is never in the database:
-- whoever can rewrite the database must not be able to re-sign it.
CREATE TABLE audit_signing_keys (
  key_id            text PRIMARY KEY CHECK (key_id ~ '^[A-Za-z0-9._:-]{1,64}$'),
  algorithm         text NOT NULL DEFAULT 'Ed25519' CHECK (algorithm = 'Ed25519'),
  public_key        text NOT NULL,
  note_verifier_key text NOT NULL UNIQUE,
  created_at        timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Signed tree heads, oldest first (id). The same size may be signed again (e.g. after a key
-- rotation, so that the newest checkpoint is always under the current key).
CREATE TABLE audit_checkpoints (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tree_size            bigint NOT NULL CHECK (tree_size >= 1),
  root_hash            bytea NOT NULL CHECK (octet_length(root_hash) = 32),
  prev_checkpoint_hash bytea CHECK (octet_length(prev_checkpoint_hash) = 32),
  key_id               text NOT NULL,
  signature            bytea NOT NULL CHECK (octet_length(signature) = 64),
  note                 text NOT NULL,
  created_at           timestamptz NOT NULL
);
CREATE INDEX audit_checkpoints_size_idx ON audit_checkpoints (tree_size);

-- The log's name in its checkpoints (AUDIT_LOG_ORIGIN, or generated once and kept here).
CREATE TABLE audit_log_origin (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  origin    text NOT NULL CHECK (origin ~ '^[^\s+]{1,200}$')
);

CREATE TRIGGER audit_seal_no_update BEFORE UPDATE OR DELETE ON audit_seal
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_seal_no_truncate BEFORE TRUNCATE ON audit_seal
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_tree_nodes_no_update BEFORE UPDATE OR DELETE ON audit_tree_nodes
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_tree_nodes_no_truncate BEFORE TRUNCATE ON audit_tree_nodes
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_signing_keys_no_update BEFORE UPDATE OR DELETE ON audit_signing_keys
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_signing_keys_no_truncate BEFORE TRUNCATE ON audit_signing_keys
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE OR DELETE ON audit_checkpoints
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON audit_checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_log_origin_no_update BEFORE UPDATE OR DELETE ON audit_log_origin
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_log_origin_no_truncate BEFORE TRUNCATE ON audit_log_origin
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();

ALTER TABLE audit_seal ENABLE ALWAYS TRIGGER audit_seal_no_update;
ALTER TABLE audit_seal ENABLE ALWAYS TRIGGER audit_seal_no_truncate;
ALTER TABLE audit_tree_nodes ENABLE ALWAYS TRIGGER audit_tree_nodes_no_update;
ALTER TABLE audit_tree_nodes ENABLE ALWAYS TRIGGER audit_tree_nodes_no_truncate;
ALTER TABLE audit_signing_keys ENABLE ALWAYS TRIGGER audit_signing_keys_no_update;
ALTER TABLE audit_signing_keys ENABLE ALWAYS TRIGGER audit_signing_keys_no_truncate;
ALTER TABLE audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_no_update;
ALTER TABLE audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_no_truncate;
ALTER TABLE audit_log_origin ENABLE ALWAYS TRIGGER audit_log_origin_no_update;
ALTER TABLE audit_log_origin ENABLE ALWAYS TRIGGER audit_log_origin_no_truncate;
