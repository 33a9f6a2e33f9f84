#!/bin/sh
# Run once by the postgres image on an empty data directory (docker-entrypoint-initdb.d):
# creates the login the Teamlog instances run as, a member of teamlog_app and nothing else,
# as docs/operations.md, "Running on PostgreSQL", tells production to. The migrations (compose.yaml's
# one-shot `migrate` service, as the owner) then give teamlog_app its grants; the role is
# created here exactly as migrations/R__privileges.sql would, so that the grant can be given now.
set -eu
# compose.yaml requires it; said here too, so that an empty one is never a login's password.
: "${TEAMLOG_DB_PASSWORD:?TEAMLOG_DB_PASSWORD must be set: the password of the instances' login}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -v password="$TEAMLOG_DB_PASSWORD" <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'teamlog_app') THEN
    CREATE ROLE teamlog_app NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
  END IF;
END $$;
CREATE ROLE teamlog LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'password';
GRANT teamlog_app TO teamlog;
SQL
