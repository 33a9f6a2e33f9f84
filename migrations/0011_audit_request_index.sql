-- request:<id> in audit search (docs/audit-search.md): an index on request_id. The service's
-- own request ids are UUIDv7 from this release on (src/http/conventions.ts), ordered by time,
-- so a new record's entry lands at the index's end like the primary key's: about 80 B of WAL a
-- record, where random ids made each write log a full-page image of its leaf after every
-- checkpoint. An id a caller sends (X-Request-Id) goes where it sorts, as before.
CREATE INDEX audit_log_request_idx ON audit_log (request_id);
