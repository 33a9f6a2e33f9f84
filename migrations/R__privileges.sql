-- Repeatable: applied after every migration run (server mode only), so that tables added by
-- later migrations are covered. The service connects as teamlog_app: a non-owner role that
-- may only INSERT and SELECT the audit tables. Roles are cluster-wide, so creating it must
-- tolerate another database (or instance) creating it at the same moment.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'teamlog_app') THEN
    CREATE ROLE teamlog_app NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
  NULL;
END
$$;

GRANT USAGE ON SCHEMA public TO teamlog_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO teamlog_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO teamlog_app;

-- Append-only evidence: no UPDATE, DELETE or TRUNCATE, whatever the triggers say.
REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM teamlog_app;
REVOKE UPDATE, DELETE, TRUNCATE ON audit_seal_batches, audit_tiles, audit_signing_keys, audit_checkpoints, audit_log_origin FROM teamlog_app;
-- Witnesses' cosignatures are kept as they came (migrations/0017); each witness's state and the
-- submitter's lease are working state, updated in place.
REVOKE UPDATE, DELETE, TRUNCATE ON audit_cosignatures FROM teamlog_app;
-- The outbox and its batches are written once and only ever deleted (pruning): never updated.
REVOKE UPDATE ON outbox, outbox_batches FROM teamlog_app;
-- Erasing personal data is an operator's act (teamlog audit redact), not the service's.
REVOKE UPDATE, DELETE, TRUNCATE ON audit_personal_data FROM teamlog_app;
-- The schema is the owner's business.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON schema_migrations FROM teamlog_app;
-- Functions are the owner's too; teamlog_app calls only this one, which summarizes the audit
-- log's BRIN for it (migrations/0013: the service owns no index).
GRANT EXECUTE ON FUNCTION audit_summarize_time_index() TO teamlog_app;
