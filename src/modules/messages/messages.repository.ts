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
  insert: `INSERT INTO messages (room, project_id, author_id, text) VALUES ($1, $2, $3, $4) RETURNING ${COLUMNS}`,
  list: `SELECT ${COLUMNS} FROM messages WHERE room = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`,
});

export async function insertMessage(q: Queryable, m: { room: string; projectId: number | null; authorId: number; text: string }): Promise<MessageRow> {
  return (await query<MessageRow>(q, S.insert, [m.room, m.projectId, m.authorId, m.text]))[0]!;
}

export const listMessages = (q: Queryable, room: string, beforeId: number | undefined, limit: number) => query<MessageRow>(q, S.list, [room, beforeId ?? null, limit + 1]);
