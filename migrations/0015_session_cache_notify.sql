-- The session cache's notices (src/modules/sessions/sessions.cache.ts). Each instance keeps the
-- live sessions it authenticated in memory, and drops one when told on the channel
-- teamlog_sessions: 's:<session id>', 'u:<user id>' (every session of that user), '*' (all).
-- NOTIFY is transactional: the notice leaves at commit, and never for a rollback.
--
-- Triggers rather than the service, so that a change made anywhere (another instance, the CLI,
-- an operator's UPDATE) reaches every cache. Only the changes that can alter what a cached
-- session answers notify: a session revoked, cut short or deleted while live; a user's role,
-- active flag, email or name changed; a user deleted. The frequent ones (a refresh extending
-- expires_at, users.updated_at and version, a password hash alone: its change revokes the
-- sessions) do not: PostgreSQL serializes the commits of notifying transactions, so a NOTIFY on
-- every write would cost every write (src/use-cases/commit-signal.ts).

CREATE FUNCTION session_cache_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('teamlog_sessions', CASE
    WHEN TG_OP = 'TRUNCATE' THEN '*'
    WHEN TG_TABLE_NAME = 'sessions' THEN 's:' || OLD.id
    ELSE 'u:' || OLD.id
  END);
  RETURN NULL;
END;
$$;

CREATE TRIGGER sessions_cache_notify_update AFTER UPDATE ON sessions FOR EACH ROW
  WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR NEW.expires_at < OLD.expires_at OR OLD.user_id <> NEW.user_id)
  EXECUTE FUNCTION session_cache_notify();
-- A session no cache can hold (revoked: announced then; expired) goes quietly: pruning deletes
-- thousands of expired ones at a time.
CREATE TRIGGER sessions_cache_notify_delete AFTER DELETE ON sessions FOR EACH ROW
  WHEN (OLD.revoked_at IS NULL AND OLD.expires_at > now())
  EXECUTE FUNCTION session_cache_notify();
CREATE TRIGGER sessions_cache_notify_truncate AFTER TRUNCATE ON sessions
  FOR EACH STATEMENT EXECUTE FUNCTION session_cache_notify();

CREATE TRIGGER users_cache_notify_update AFTER UPDATE ON users FOR EACH ROW
  WHEN (OLD.role <> NEW.role OR OLD.active <> NEW.active OR OLD.email <> NEW.email OR OLD.name <> NEW.name)
  EXECUTE FUNCTION session_cache_notify();
CREATE TRIGGER users_cache_notify_delete AFTER DELETE ON users
  FOR EACH ROW EXECUTE FUNCTION session_cache_notify();
CREATE TRIGGER users_cache_notify_truncate AFTER TRUNCATE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION session_cache_notify();
