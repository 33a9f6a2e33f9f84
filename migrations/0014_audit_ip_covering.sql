-- Audit search by address or network (ip:<address>, ip:<network>; docs/audit-search.md): the ip
-- index holds the address too, so that a search's ids come from the index alone.
--
-- PostgreSQL makes an index-only scan only when the index can give back every column the query
-- uses. audit_log_ip_idx (0010) held audit_ip(ip), not ip itself, so a search for a network
-- read each matching record's row and called audit_ip on it again to check the range (a B-tree
-- reads a network as a range of addresses, which PostgreSQL checks again): 5.5 ms for a /24 whose
-- 1,000 records lie a year apart in a million. With ip included, the list (audit.repository.ts,
-- idsFirst) takes the page's ids from the index, checking the range on the index's own value,
-- and reads 21 rows: 0.46 ms. The entry grows by the address's text: 41 to 48 MB for a million
-- records, 33 B more WAL a write (docs/audit-search.md).
--
-- Made again under the same name: the upgrade builds it once, holding writes to audit_log for
-- the build (3.4 s for a million records here), as the first version's migration did.
DROP INDEX audit_log_ip_idx;
CREATE INDEX audit_log_ip_idx ON audit_log (audit_ip(ip), id DESC) INCLUDE (ip);
-- A new index on an expression has no statistics for it until the table is analyzed again, and
-- for an append-only table autovacuum does that only after it grew by a tenth. Without them
-- PostgreSQL guesses that a network holds 0.5 % of the records and walks the newest ids for any
-- of them: 26 ms for a /24 of 2,000 records in a million, measured. 0.4 s for a million here.
ANALYZE audit_log;
