-- The webhook's cursor belongs to a receiver (src/modules/audit/integrity/webhook.ts): pointing
-- AUDIT_WEBHOOK_URL at a new receiver starts that receiver from seq 0, since it holds nothing
-- yet, where the one cursor carried the old receiver's position over and the new one never got
-- the records before it. A receiver is named by its URL without credentials, query or fragment
-- (scheme, host, port and path): no secret is stored, and a token in the query can be rotated
-- without sending everything again. Duplicates are harmless (receivers drop them by seq); a
-- receiver that misses records is not.
--   receiver  NULL for the row that was there before this migration: the first receiver an
--             instance delivers to adopts it (and its position); at most one such row.
ALTER TABLE audit_webhook_cursor DROP COLUMN singleton;
ALTER TABLE audit_webhook_cursor ADD COLUMN receiver text UNIQUE;
CREATE UNIQUE INDEX audit_webhook_cursor_one_unadopted ON audit_webhook_cursor ((true)) WHERE receiver IS NULL;
