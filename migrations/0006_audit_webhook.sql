-- Streaming the audit log out (API.md 5.9, src/modules/audit/integrity/webhook.ts): where the
-- webhook stands, kept in the database so that a receiver that is down for hours, or a
-- restart of the service, loses nothing. One row. Not evidence: the service moves it (the
-- grants of R__privileges.sql give teamlog_app UPDATE on it, as on every table but the
-- evidence).
--   next_seq            the next audit_seal.seq to deliver (everything below was answered 2xx)
--   last_checkpoint_id  the newest audit_checkpoints.id delivered (0: none yet)
--   holder, lease_until the instance delivering now, and until when its lease runs (renewed
--                       every few seconds while it works; another instance may take an
--                       expired one)
CREATE TABLE audit_webhook_cursor (
  singleton          boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  next_seq           bigint NOT NULL DEFAULT 0 CHECK (next_seq >= 0),
  last_checkpoint_id bigint NOT NULL DEFAULT 0 CHECK (last_checkpoint_id >= 0),
  holder             text,
  lease_until        timestamptz,
  delivered_at       timestamptz,
  CHECK ((holder IS NULL) = (lease_until IS NULL))
);

INSERT INTO audit_webhook_cursor DEFAULT VALUES;
