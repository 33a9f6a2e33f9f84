-- A task's status change (PUT /tasks/:id/status, the most frequent edit) as a heap-only (HOT)
-- update: the new row version stays on its page and no index gets an entry. PostgreSQL can do
-- that only when no index names a column the update changes; a status change sets status,
-- version and updated_at, and tasks_status_idx was the one index among them. With it, every
-- status change added an entry to each of the five indexes of tasks, the words' GIN index
-- among them: about 300 bytes of WAL and five index insertions per change (bench/results).
--
-- What the index served: GET /tasks?status=…, newest first. The list is scoped by the caller's
-- projects (tasks_project_idx) and walks newest first either way; a status filter over five
-- values narrows it by about a fifth, which the walk reads past. docs/performance.md has the
-- plans with and without the index.
--
-- fillfactor leaves a tenth of each page free for the new versions of its rows: a HOT update
-- needs room on the row's own page. It applies to pages written from now on (a VACUUM FULL or
-- pg_repack would apply it to the old ones; the upgrade does not rewrite the table).
DROP INDEX tasks_status_idx;
ALTER TABLE tasks SET (fillfactor = 90);
