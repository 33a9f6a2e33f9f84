-- Audit search (GET /audit-logs?q=, docs/audit-search.md): what the keys the older indexes do
-- not serve need. action, actor:<id>, resource and created use the indexes of 0001.

-- ip: the column is text (the address the service saw, or a forwarded one), so a network search
-- (ip:10.0.0.0/8) compares it as inet. A cast would fail the whole query, and with an index every
-- insert, on one value that is no address; this is null for it instead. An IPv4 client seen on a
-- dual-stack socket (::ffff:a.b.c.d) is its IPv4 address, as the search takes it.
-- PARALLEL RESTRICTED: the exception block is a subtransaction, which a parallel worker (a
-- parallel index build, say) may not start.
CREATE FUNCTION audit_ip(address text) RETURNS inet
  LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL RESTRICTED AS $$
BEGIN
  IF address ILIKE '::ffff:%.%' THEN
    address := substr(address, 8);
  END IF;
  RETURN address::inet;
EXCEPTION WHEN others THEN
  RETURN NULL;
END;
$$;

-- Measured necessary on a million records (docs/audit-search.md): without it ip:<address> walked
-- the table (0.5-3 s); with it 0.08 ms, a /24 network 4 ms. An address by equality in id order,
-- a network by range (<<= is indexable on a B-tree). 96 B of WAL per audited write, measured.
CREATE INDEX audit_log_ip_idx ON audit_log (audit_ip(ip), id DESC);
-- request:<id> has no index on purpose (docs/audit-search.md): request ids are random, so a
-- B-tree on them takes a full-page image of a different leaf for most writes after each
-- checkpoint (7.3 KB of WAL per write measured just after one), more than a POST /tasks costs.
-- result: the rare outcomes only. A SUCCESS (nearly every write) adds no entry and no WAL;
-- result:SUCCESS is most records, which the newest ids give at once.
CREATE INDEX audit_log_unsuccessful_idx ON audit_log (result, id DESC) WHERE result <> 'SUCCESS';
