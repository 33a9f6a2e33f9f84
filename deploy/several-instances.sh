#!/usr/bin/env bash
# Several Teamlog instances on one PostgreSQL and one Redis, the way README "Several instances"
# describes, in one script (test/several-instances.test.ts runs it):
#   1. as the database's owner: create the database if it is missing, apply the migrations, and
#      make the login `teamlog`, a member of the restricted role teamlog_app and nothing more
#      (each step finds what a previous run made, so the script can be run again);
#   2. once: generate what every instance must share into a file of its own (mode 0600): the JWT
#      secret, the audit signing key, the login's password and the first ADMIN's password;
#   3. start the instances as `teamlog` (no right to change the schema; nothing to migrate), each
#      with its own PORT and DATA_DIR, and the same everything else; stop them all on Ctrl-C.
#
#   OWNER_URL=postgres://postgres@127.0.0.1:5432/teamlog deploy/several-instances.sh
#
# Settings (environment):
#   OWNER_URL       the owner's URL of the database (required); its database is created if missing
#   REDIS_URL       default redis://127.0.0.1:6379
#   INSTANCES       default 2
#   FIRST_PORT      default 3001 (the instances listen on FIRST_PORT, FIRST_PORT+1, …)
#   HOST            default 127.0.0.1
#   STATE_DIR       default ./several-instances: the shared settings (shared.env) and each
#                   instance's DATA_DIR and log
#   ADMIN_EMAIL     default admin@teamlog.local: the first ADMIN (its password is in shared.env)
#   TEAMLOG_LOGIN   default teamlog: the login the instances use
#   (SERVER_JS, CLI_JS and NODE_ARGS point at other entries: the tests run their own build of them: test/helpers/paths.ts)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
: "${OWNER_URL:?set OWNER_URL to the URL of the database owner, e.g. postgres://postgres@127.0.0.1:5432/teamlog}"
REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"
INSTANCES="${INSTANCES:-2}"
FIRST_PORT="${FIRST_PORT:-3001}"
HOST="${HOST:-127.0.0.1}"
STATE_DIR="${STATE_DIR:-./several-instances}"
ADMIN_EMAIL="${ADMIN_EMAIL:-admin@teamlog.local}"
TEAMLOG_LOGIN="${TEAMLOG_LOGIN:-teamlog}"
NODE="${NODE:-node}"
NODE_ARGS="${NODE_ARGS:-}"
SERVER_JS="${SERVER_JS:-$ROOT/dist/server.js}"
CLI_JS="${CLI_JS:-$ROOT/dist/cli.js}"

say() { echo "[several-instances] $*"; }

[ -f "$SERVER_JS" ] || { say "building (npm run build)…"; (cd "$ROOT" && npm run build >/dev/null); }
mkdir -p "$STATE_DIR"
STATE_DIR="$(cd "$STATE_DIR" && pwd)"
umask 077

# ── what every instance shares, generated once ────────────────────────────────────────────
SHARED="$STATE_DIR/shared.env"
if [ ! -f "$SHARED" ]; then
  say "generating the shared secrets into $SHARED (mode 0600)"
  "$NODE" --input-type=module -e '
    import { generateKeyPairSync, randomBytes } from "node:crypto";
    const key = generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" });
    const line = (k, v) => `${k}=${JSON.stringify(v)}`;
    console.log([
      line("JWT_SECRET", randomBytes(48).toString("base64url")),
      // One line: the service reads "\n" in AUDIT_SIGNING_KEY as a newline.
      line("AUDIT_SIGNING_KEY", key.trim().split("\n").join("\\n")),
      line("TEAMLOG_DB_PASSWORD", randomBytes(24).toString("base64url")),
      line("ADMIN_PASSWORD", randomBytes(18).toString("base64url")),
    ].join("\n"));
  ' > "$SHARED"
fi
# shellcheck disable=SC1090
set -a; . "$SHARED"; set +a

# ── as the owner: the database, the migrations, the login ─────────────────────────────────
read -r ADMIN_URL DB_NAME APP_URL < <("$NODE" -e '
  const owner = new URL(process.argv[1]);
  const db = decodeURIComponent(owner.pathname.slice(1));
  if (!db) { console.error("OWNER_URL names no database"); process.exit(2); }
  const admin = new URL(owner); admin.pathname = "/postgres";
  const app = new URL(owner); app.username = process.argv[2]; app.password = process.argv[3];
  console.log(admin.href, db, app.href);
' "$OWNER_URL" "$TEAMLOG_LOGIN" "$TEAMLOG_DB_PASSWORD")

# The statement goes in on stdin: psql substitutes variables (:'db') there, never in -c. A psql
# that fails here stops the script (set -e), rather than being taken for a missing database.
exists="$(psql "$ADMIN_URL" -XAtq -v ON_ERROR_STOP=1 -v db="$DB_NAME" <<'SQL'
SELECT 1 FROM pg_database WHERE datname = :'db'
SQL
)"
if [ "$exists" = "1" ]; then
  say "the database $DB_NAME exists"
else
  say "creating the database $DB_NAME"
  psql "$ADMIN_URL" -Xq -v ON_ERROR_STOP=1 -v db="$DB_NAME" <<'SQL'
SELECT format('CREATE DATABASE %I', :'db') \gexec
SQL
fi

say "applying the migrations as the owner"
MIGRATION_DATABASE_URL="$OWNER_URL" DATABASE_URL="$OWNER_URL" "$NODE" $NODE_ARGS "$CLI_JS" migrate

say "making the login $TEAMLOG_LOGIN a member of teamlog_app (and nothing more)"
psql "$OWNER_URL" -Xq -v ON_ERROR_STOP=1 -v login="$TEAMLOG_LOGIN" -v pw="$TEAMLOG_DB_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE', :'login')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'login') \gexec
SELECT format('ALTER ROLE %I PASSWORD %L', :'login', :'pw') \gexec
SELECT format('GRANT teamlog_app TO %I', :'login') \gexec
SQL

# ── the instances ─────────────────────────────────────────────────────────────────────────
pids=()
stop_all() {
  trap - EXIT INT TERM
  [ ${#pids[@]} -eq 0 ] || { kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
}
trap stop_all EXIT
trap 'exit 0' INT TERM

for ((i = 0; i < INSTANCES; i++)); do
  port=$((FIRST_PORT + i))
  dir="$STATE_DIR/instance-$((i + 1))"
  mkdir -p "$dir"
  # Exactly the shared settings, the instance's own PORT and DATA_DIR, and no owner URL.
  env -u MIGRATION_DATABASE_URL DATABASE_URL="$APP_URL" REDIS_URL="$REDIS_URL" HOST="$HOST" PORT="$port" DATA_DIR="$dir" \
    ADMIN_EMAIL="$ADMIN_EMAIL" "$NODE" $NODE_ARGS "$SERVER_JS" >"$dir/teamlog.log" 2>&1 &
  pids+=($!)
  say "instance $((i + 1)): http://$HOST:$port (pid $!, log $dir/teamlog.log)"
done

say "first ADMIN: $ADMIN_EMAIL, password ADMIN_PASSWORD in $SHARED"
say "stop them all with Ctrl-C"
# Any instance that exits takes the others down with it: a recipe that half-runs is not one.
status=0
wait -n "${pids[@]}" || status=$?
say "an instance exited (status $status); stopping the others"
exit "$status"
