// SQL for posts and likes. like_count is kept by a trigger on post_likes (migrations).
import type { Queryable } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';

export interface PostRow {
  id: number;
  author_id: number;
  content: string;
  like_count: number;
  liked_by_me: boolean;
  version: number;
  created_at: string;
}

// $2 is the viewer, for liked_by_me.
const COLUMNS = `p.id, p.author_id, p.content, p.like_count, p.version, p.created_at,
    EXISTS (SELECT 1 FROM post_likes l WHERE l.post_id = p.id AND l.user_id = $2) AS liked_by_me`;

const S = statements('posts', {
  find: `SELECT ${COLUMNS} FROM posts p WHERE p.id = $1`,
  // Locked only to honour If-Match: likes need no lock (the trigger's update serializes counts).
  lock: `SELECT ${COLUMNS} FROM posts p WHERE p.id = $1 FOR NO KEY UPDATE`,
  list: `SELECT ${COLUMNS} FROM posts p
   WHERE ($1::bigint IS NULL OR p.author_id = $1) AND ($3::bigint IS NULL OR p.id < $3)
   ORDER BY p.id DESC LIMIT $4`,
  insert: 'INSERT INTO posts (author_id, content) VALUES ($1, $2) RETURNING id',
  delete: 'DELETE FROM posts WHERE id = $1',
  like: 'INSERT INTO post_likes (post_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING 1',
  unlike: 'DELETE FROM post_likes WHERE post_id = $1 AND user_id = $2 RETURNING 1',
});

export const findPost = async (q: Queryable, id: number, viewerId: number) => (await query<PostRow>(q, S.find, [id, viewerId]))[0];
export const lockPost = async (q: Queryable, id: number, viewerId: number) => (await query<PostRow>(q, S.lock, [id, viewerId]))[0];

export const listPosts = (q: Queryable, viewerId: number, authorId: number | undefined, beforeId: number | undefined, limit: number) =>
  query<PostRow>(q, S.list, [authorId ?? null, viewerId, beforeId ?? null, limit + 1]);

export const insertPost = async (q: Queryable, authorId: number, content: string) => (await query<{ id: number }>(q, S.insert, [authorId, content]))[0]!.id;
export const deletePost = (q: Queryable, id: number) => query(q, S.delete, [id]);

/** Adds or takes back a like; answers whether anything changed. */
export const setLike = async (q: Queryable, postId: number, userId: number, like: boolean) => (await query(q, like ? S.like : S.unlike, [postId, userId])).length > 0;
