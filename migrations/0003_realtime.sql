-- Real-time delivery: outbox rows are numbered after they commit, in commit order, and the
-- number is the event_id clients see and replay from (API.md section 6, section 5 item 5).

-- Null until the sequencer numbers the row; then dense and increasing in delivery order.
ALTER TABLE events ADD COLUMN event_id bigint UNIQUE;

-- The sequencer reads the committed rows it has not numbered yet, in (xact_id, id) order;
-- the partial index holds only those, so it stays small however long the outbox is kept.
DROP INDEX events_xact_idx;
CREATE INDEX events_unnumbered_idx ON events (xact_id, id) WHERE event_id IS NULL;

-- The last event_id given out. One row, changed only by the sequencer (under its lock), so
-- event ids never repeat, even after every event has been pruned.
CREATE TABLE event_sequence (
  last_event_id bigint NOT NULL,
  single boolean PRIMARY KEY DEFAULT true CHECK (single)
);
INSERT INTO event_sequence (last_event_id) VALUES (0);
