-- Task search (GET /tasks?q=) by an index on the expression instead of a stored tsvector column:
-- the same index, the same matches, but each task row no longer carries its words a second time
-- (about 60 bytes of heap and WAL per created task in the benchmark, and again on each edit of
-- the title or description). The query names the same expression (tasks.repository.ts), so that
-- the planner uses the index; PostgreSQL rechecks a phrase match against the row itself.
CREATE INDEX tasks_words_idx ON tasks USING gin (to_tsvector('simple', title || ' ' || description));
DROP INDEX tasks_search_idx;
ALTER TABLE tasks DROP COLUMN search;
