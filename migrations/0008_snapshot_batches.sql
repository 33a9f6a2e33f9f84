-- Commit order by snapshot batches, and nothing written to a row after its insert
-- (docs/audit-integrity.md §3, docs/commit-order.md).
--
-- Until now every consumer read rows older than the xmin horizon in (xact_id, id) order. A
-- transaction gets its id at its first write or row lock, so a request that started first,
-- waited on a lock and committed last was delivered and sealed first: its effect before its
-- cause. Consumers now take batches the way PgQ's ticks do: the rows that became visible between
-- two snapshots (pg_current_snapshot(), pg_visible_in_snapshot()), ordered by id inside a
-- batch. A transaction that committed later always falls in a later batch, and inside a batch
-- id order respects "written after another committed": the id was drawn after that commit.
-- Numbers (event_id, seq) are given when a batch is read and kept as one row per batch, never by
-- updating the rows themselves.
--
-- Upgrading in place: stop every instance of the previous release first (its sealer and
-- sequencer write the tables this migration replaces). Everything numbered or sealed before
-- keeps its event_id and its seq; see each part below.

-- ── The outbox: one row per committed transaction that carries events ───────────────────────
-- items: [{name, room, payload}] in the order the transaction emitted them. Written once, never
-- updated; read by xact_id (the batch reader), by id (replay), and deleted after
-- EVENT_RETENTION_HOURS. json, not jsonb: kept as the text it was written as, which is smaller
-- and cheaper to write (no binary form), and it is read whole a few times at most.
CREATE TABLE outbox (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  xact_id    xid8 NOT NULL DEFAULT pg_current_xact_id(),
  items      json NOT NULL CHECK (json_typeof(items) = 'array'),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_xact_idx ON outbox (xact_id);

-- The outbox one event a row, for people reading it (operators, tests): row_id and position say
-- which transaction's row and where in it.
CREATE VIEW outbox_events AS
  SELECT o.id AS row_id, i.position, i.item->>'name' AS name, i.item->>'room' AS room, i.item->'payload' AS payload, o.xact_id, o.created_at
    FROM outbox o CROSS JOIN LATERAL json_array_elements(o.items) WITH ORDINALITY AS i(item, position);

-- One row per batch the relay numbered: events first_event_id … last_event_id are the items of
-- the outbox rows row_ids, in that order. Where the reader stands is the newest row: every row
-- visible in `snapshot` is numbered, except, while through_id is set, the rows of the pair
-- (after_snapshot, snapshot) with an id above it (a pair too big for one batch). The next batch
-- starts at last_event_id + 1; only a row made by this migration may be empty (it keeps the
-- numbering going when the newest events were pruned).
CREATE TABLE outbox_batches (
  first_event_id bigint NOT NULL CHECK (first_event_id >= 1),
  event_count    integer NOT NULL CHECK (event_count >= 0),
  last_event_id  bigint GENERATED ALWAYS AS (first_event_id + event_count - 1) STORED PRIMARY KEY,
  row_ids        bigint[] NOT NULL,
  after_snapshot pg_snapshot NOT NULL,
  snapshot       pg_snapshot NOT NULL,
  through_id     bigint,
  created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The previous release's events keep their event_ids. Writers still running wait here, so that
-- none commits a row after it was copied.
LOCK TABLE events, event_sequence IN ACCESS EXCLUSIVE MODE;

-- Committed rows the previous sequencer had not numbered yet: numbered as it would have.
WITH pending AS (
  SELECT id, row_number() OVER (ORDER BY xact_id, id) AS n FROM events WHERE event_id IS NULL
), base AS (
  SELECT last_event_id FROM event_sequence
)
UPDATE events e SET event_id = base.last_event_id + pending.n FROM pending, base WHERE e.id = pending.id;
UPDATE event_sequence SET last_event_id = GREATEST(last_event_id, COALESCE((SELECT max(event_id) FROM events), 0));

-- Each event becomes an outbox row of its own, under its id (an /admin record event names its
-- record, {id}, as the new writer's do too).
INSERT INTO outbox (id, xact_id, items, created_at) OVERRIDING SYSTEM VALUE
SELECT e.id, e.xact_id, json_build_array(json_build_object('name', e.name, 'room', e.room, 'payload', e.payload)), e.created_at
  FROM events e;
SELECT setval(pg_get_serial_sequence('outbox', 'id'), GREATEST((SELECT max(id) FROM events), (SELECT last_value FROM events_id_seq), 1));

-- One batch per run of consecutive event_ids (pruning by age can leave holes), and a last, empty
-- one when the newest ids were pruned: the next event_id follows the last one ever given.
INSERT INTO outbox_batches (first_event_id, event_count, row_ids, after_snapshot, snapshot)
SELECT min(event_id), count(*), array_agg(id ORDER BY event_id), pg_current_snapshot(), pg_current_snapshot()
  FROM (SELECT id, event_id, event_id - row_number() OVER (ORDER BY event_id) AS run FROM events) numbered
 GROUP BY run;
INSERT INTO outbox_batches (first_event_id, event_count, row_ids, after_snapshot, snapshot)
SELECT s.last_event_id + 1, 0, '{}', pg_current_snapshot(), pg_current_snapshot()
  FROM event_sequence s
 WHERE s.last_event_id > 0 AND NOT EXISTS (SELECT 1 FROM outbox_batches b WHERE b.last_event_id >= s.last_event_id);

DROP TABLE events;
DROP TABLE event_sequence;

-- ── The seal: one row per batch, the tree as C2SP tlog-tiles ─────────────────────────────────
-- Records seq first_seq … first_seq + n − 1 are record_ids, in that order, with their leaf hashes
-- (leaves, 32 bytes each: an array, so that a reader unnests it once per batch). Dense: every batch but the first starts where another ends
-- (prev_seq references next_seq), and seqs never overlap (both unique). record_span
-- (min..max record id) finds a record's batch. Where the sealer stands is the newest row, as for
-- the outbox; rows converted from the previous release's seal have no snapshot, and the first
-- batch after them takes the committed records past that release's cursor in (xact_id, id)
-- order, (after_xact, after_id).
CREATE FUNCTION audit_hashes_ok(hashes bytea[]) RETURNS boolean LANGUAGE sql IMMUTABLE
  AS $$ SELECT COALESCE(bool_and(octet_length(h) = 32), true) FROM unnest(hashes) h $$;

CREATE TABLE audit_seal_batches (
  first_seq      bigint PRIMARY KEY CHECK (first_seq >= 0),
  record_ids     bigint[] NOT NULL CHECK (cardinality(record_ids) >= 1 AND array_ndims(record_ids) = 1),
  leaves         bytea[] NOT NULL CHECK (array_ndims(leaves) = 1 AND audit_hashes_ok(leaves)),
  next_seq       bigint GENERATED ALWAYS AS (first_seq + cardinality(record_ids)) STORED UNIQUE,
  prev_seq       bigint GENERATED ALWAYS AS (NULLIF(first_seq, 0)) STORED REFERENCES audit_seal_batches (next_seq),
  record_span    int8range NOT NULL,
  after_snapshot pg_snapshot,
  after_xact     xid8,
  after_id       bigint,
  snapshot       pg_snapshot,
  through_id     bigint,
  sealed_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK (cardinality(leaves) = cardinality(record_ids)),
  CHECK (snapshot IS NOT NULL OR (after_xact IS NOT NULL AND after_id IS NOT NULL))
);
CREATE INDEX audit_seal_batches_span_idx ON audit_seal_batches USING gist (record_span);

-- Hash tiles (c2sp.org/tlog-tiles): tile (level, idx) holds the hashes of tree level 8·level,
-- nodes idx·256 …; a full tile has 256 (width 256) and never changes. Partial tiles of level 1 and
-- up are kept at each width they reached (append-only: a wider one is a new row); level 0's
-- partial tile is the leaves of the batches since its start.
CREATE TABLE audit_tiles (
  level  smallint NOT NULL CHECK (level BETWEEN 0 AND 6),
  idx    bigint NOT NULL CHECK (idx >= 0),
  width  smallint NOT NULL CHECK (width BETWEEN 1 AND 256),
  hashes bytea NOT NULL,
  PRIMARY KEY (level, idx, width),
  CHECK (octet_length(hashes) = 32 * width),
  CHECK (level > 0 OR width = 256)
);

LOCK TABLE audit_seal, audit_tree_nodes IN ACCESS EXCLUSIVE MODE;

-- The previous seal, 1024 records a batch; its last batch carries the previous sealer's cursor.
INSERT INTO audit_seal_batches (first_seq, record_ids, leaves, record_span, after_xact, after_id, sealed_at)
SELECT min(seq), array_agg(record_id ORDER BY seq), array_agg(leaf_hash ORDER BY seq),
       int8range(min(record_id), max(record_id), '[]'),
       (array_agg(record_xact_id ORDER BY seq DESC))[1], (array_agg(record_id ORDER BY seq DESC))[1], max(sealed_at)
  FROM audit_seal GROUP BY seq / 1024;
-- Its leaves as full level-0 tiles, and its stored nodes of levels 8, 16, … as the tiles above.
INSERT INTO audit_tiles (level, idx, width, hashes)
SELECT 0, seq / 256, 256, string_agg(leaf_hash, ''::bytea ORDER BY seq)
  FROM audit_seal GROUP BY seq / 256 HAVING count(*) = 256;
INSERT INTO audit_tiles (level, idx, width, hashes)
SELECT level / 8, idx / 256, count(*), string_agg(hash, ''::bytea ORDER BY idx)
  FROM audit_tree_nodes WHERE level % 8 = 0 GROUP BY level, idx / 256;

DROP TABLE audit_seal;
DROP TABLE audit_tree_nodes;

-- The seal one record a row, as the previous release's table read, for people reading it
-- (operators, tests): a record's seq, its id and its leaf, and when its batch was sealed.
CREATE VIEW audit_seal AS
  SELECT b.first_seq + u.ord - 1 AS seq, u.id AS record_id, u.leaf AS leaf_hash, b.sealed_at
    FROM audit_seal_batches b CROSS JOIN LATERAL unnest(b.record_ids, b.leaves) WITH ORDINALITY AS u(id, leaf, ord);

CREATE TRIGGER audit_seal_batches_no_update BEFORE UPDATE OR DELETE ON audit_seal_batches
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_seal_batches_no_truncate BEFORE TRUNCATE ON audit_seal_batches
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_tiles_no_update BEFORE UPDATE OR DELETE ON audit_tiles
  FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_tiles_no_truncate BEFORE TRUNCATE ON audit_tiles
  FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
ALTER TABLE audit_seal_batches ENABLE ALWAYS TRIGGER audit_seal_batches_no_update;
ALTER TABLE audit_seal_batches ENABLE ALWAYS TRIGGER audit_seal_batches_no_truncate;
ALTER TABLE audit_tiles ENABLE ALWAYS TRIGGER audit_tiles_no_update;
ALTER TABLE audit_tiles ENABLE ALWAYS TRIGGER audit_tiles_no_truncate;

-- ── audit_log: the reader's index, and bounds on what a record may hold ──────────────────────
-- The batch reader looks records up by transaction (PgQ's way of bounding the scan); the order
-- of (xact_id, id) is no longer anyone's.
DROP INDEX audit_log_commit_order_idx;
CREATE INDEX audit_log_xact_idx ON audit_log (xact_id);

-- A record's sealed form must fit a tlog-tiles entry (65,535 bytes): every field is bounded.
-- NOT VALID: rows already there are not re-read; every new row is held to it.
ALTER TABLE audit_log ADD CONSTRAINT audit_log_bounded CHECK (
  octet_length(metadata::text) <= 16384 AND length(ip) <= 64 AND length(user_agent) <= 512 AND length(request_id) <= 128
) NOT VALID;
