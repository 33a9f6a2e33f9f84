// SQL for chat messages.
import type { Queryable } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';

export interface MessageRow {
  id: number;
  room: string;
  author_id: number;
  text: string;
  created_at: string;
}

const COLUMNS = 'id, room, author_id, text, created_at';

const S = statements('messages', {
  insert: {
    text: `INSERT INTO messages (room, project_id, author_id, text) VALUES ($1, $2, $3, $4) RETURNING ${COLUMNS}`,
    // A batch's messages in one statement (db/shared-transaction.ts), as tasks.insert.
    gathered: `WITH input AS (
    SELECT nextval('messages_id_seq') AS id, i.*
      FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[]) WITH ORDINALITY AS i(room, project_id, author_id, text, ord)
  ), inserted AS (
    INSERT INTO messages (id, room, project_id, author_id, text) OVERRIDING SYSTEM VALUE
    SELECT id, room, project_id, author_id, text FROM input ORDER BY ord
    RETURNING ${COLUMNS}
  )
  SELECT input.ord, ${COLUMNS.split(', ').map((c) => `inserted.${c}`).join(', ')} FROM inserted JOIN input ON input.id = inserted.id`,
  },
  list: `SELECT ${COLUMNS} FROM messages WHERE room = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`,
});

export async function insertMessage(q: Queryable, m: { room: string; projectId: number | null; authorId: number; text: string }): Promise<MessageRow> {
  return (await query<MessageRow>(q, S.insert, [m.room, m.projectId, m.authorId, m.text]))[0]!;
}

export const listMessages = (q: Queryable, room: string, beforeId: number | undefined, limit: number) => query<MessageRow>(q, S.list, [room, beforeId ?? null, limit + 1]);
