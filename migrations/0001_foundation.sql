-- Foundation: users and sessions, the login throttle, the audit log core, the events outbox
-- and idempotency keys. Runs on PostgreSQL 15 and PGlite (PostgreSQL 18): nothing newer than 15.

CREATE TABLE users (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email         text NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
  name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  password_hash text NOT NULL,
  role          text NOT NULL DEFAULT 'USER' CHECK (role IN ('USER', 'ADMIN')),
  active        boolean NOT NULL DEFAULT true,
  -- Bumped by every change to the user or its sub-resources; the strong ETag derives from it.
  version       integer NOT NULL DEFAULT 1,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (email);
CREATE INDEX users_role_active_idx ON users (role, active);

CREATE TABLE sessions (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id        bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz NOT NULL,
  revoked_at     timestamptz,
  revoked_reason text,
  ip             text,
  user_agent     text
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id) WHERE revoked_at IS NULL;

-- Every refresh token ever issued, by hash. A spent one presented again is theft: the
-- whole session is revoked.
CREATE TABLE refresh_tokens (
  token_hash bytea PRIMARY KEY,
  session_id bigint NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  spent_at   timestamptz
);
CREATE INDEX refresh_tokens_session_id_idx ON refresh_tokens (session_id);

-- Counted login failures only (throttled attempts are audited, not counted), so that all
-- instances agree on the throttle.
CREATE TABLE login_failures (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email      text NOT NULL,
  ip         text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_email_idx ON login_failures (email, created_at);
CREATE INDEX login_failures_ip_idx ON login_failures (ip, created_at);

-- The audit log. No foreign keys: nothing may cascade into it.
CREATE TABLE audit_log (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  actor_id      bigint,
  action        text NOT NULL CHECK (action ~ '^[A-Z][A-Z_]*$'),
  resource_type text NOT NULL CHECK (resource_type ~ '^[A-Z][A-Z_]*$'),
  resource_id   bigint,
  "timestamp"   timestamptz NOT NULL DEFAULT clock_timestamp(),
  result        text NOT NULL CHECK (result IN ('SUCCESS', 'FAILURE', 'DENIED')),
  -- Personal data never sits here: see audit_personal_data.
  metadata      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
  ip            text,
  user_agent    text,
  request_id    text NOT NULL,
  -- The committing transaction: consumers read only rows whose transaction is older than
  -- every running one, so a late commit is never skipped (commit order, not id order).
  xact_id       xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX audit_log_actor_idx ON audit_log (actor_id, id DESC);
CREATE INDEX audit_log_resource_idx ON audit_log (resource_type, resource_id, id DESC);
CREATE INDEX audit_log_action_idx ON audit_log (action, id DESC);
CREATE INDEX audit_log_timestamp_idx ON audit_log ("timestamp");
CREATE INDEX audit_log_xact_idx ON audit_log (xact_id);

-- Personal data named by audit records (emails). The record commits to a keyed hash of the
-- value; the value lives here, so it can be erased without rewriting a record.
CREATE TABLE audit_personal_data (
  ref             text PRIMARY KEY,
  subject_user_id bigint,
  value           text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_personal_data_subject_idx ON audit_personal_data (subject_user_id);

CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

-- The server, not the client, decides when and in which transaction a record was written.
CREATE FUNCTION audit_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW."timestamp" := clock_timestamp();
  NEW.xact_id := pg_current_xact_id();
  RETURN NEW;
END;
$$;

CREATE TRIGGER audit_log_stamp BEFORE INSERT ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_stamp();
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
-- Personal data may be erased (redaction) but never rewritten.
CREATE TRIGGER audit_personal_data_no_update BEFORE UPDATE ON audit_personal_data
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
-- ALWAYS: the refusals hold even in a session with session_replication_role = replica, a
-- superuser's way of skipping ordinary triggers without any DDL. The stamp stays an ordinary
-- trigger so that a logical replica keeps the publisher's values.
ALTER TABLE audit_log ENABLE ALWAYS TRIGGER audit_log_no_update;
ALTER TABLE audit_log ENABLE ALWAYS TRIGGER audit_log_no_truncate;
ALTER TABLE audit_personal_data ENABLE ALWAYS TRIGGER audit_personal_data_no_update;

-- The outbox: events written in the same transaction as their change, delivered after
-- commit and replayed from here for 24 hours.
CREATE TABLE events (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name       text NOT NULL,
  room       text NOT NULL,
  payload    jsonb NOT NULL,
  xact_id    xid8 NOT NULL DEFAULT pg_current_xact_id(),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_created_at_idx ON events (created_at);
CREATE INDEX events_xact_idx ON events (xact_id);

CREATE TABLE idempotency_keys (
  scope            text NOT NULL,
  method           text NOT NULL,
  path             text NOT NULL,
  key              text NOT NULL,
  request_hash     text NOT NULL,
  status_code      integer,
  response_headers jsonb,
  response_body    text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, method, path, key)
);
CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);
