-- Each personal value gets a ref of its own: ref = HMAC(key, salt ‖ subject ‖ 0x00 ‖ value)
-- with a fresh random salt per value written (src/modules/audit/personal-data.ts). The salt
-- lives in the row and is erased with it, so that after `teamlog audit redact` a later record
-- naming the same value stores a new row under a new ref instead of bringing the erased one
-- back. Rows written before have no salt (their refs are HMAC(key, subject ‖ 0x00 ‖ value))
-- and keep working. Adding a nullable column rewrites no row (the no-update trigger holds).
ALTER TABLE audit_personal_data
  ADD COLUMN salt bytea CHECK (octet_length(salt) = 16);
