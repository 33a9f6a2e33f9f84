// The team feed. Likes are idempotent; like_count is kept by a trigger on post_likes, so it
// is right under concurrent likes and when a liker is deleted.
import type { Actor, RequestContext } from '../../context.js';
import type { Queryable } from '../../db/database.js';
import type { Deps } from '../../deps.js';
import { forbidden, notFound } from '../../http/errors.js';
import { pageRequest } from '../../http/pagination.js';
import { checkIfMatch, versionEtag, type IfMatch } from '../../http/preconditions.js';
import { notify } from '../notifications/notifications.writer.js';
import { addEvents } from '../outbox/outbox.js';

type Ctx = RequestContext & { actor: Actor };

export interface PostRow {
  id: number;
  author_id: number;
  content: string;
  like_count: number;
  liked_by_me: boolean;
  version: number;
  created_at: string;
}

/** liked_by_me makes two representations of one version: they carry different strong ETags. */
export const POST_VIEWS = ['', 'liked'];
export const postEtag = (p: PostRow) => versionEtag('post', p.id, p.version, p.liked_by_me ? 'liked' : '');

const COLUMNS = (viewer: string) =>
  `p.id, p.author_id, p.content, p.like_count, p.version, p.created_at,
   EXISTS (SELECT 1 FROM post_likes l WHERE l.post_id = p.id AND l.user_id = ${viewer}) AS liked_by_me`;

async function findPost(q: Queryable, id: number, viewerId: number, opts: { forUpdate?: boolean } = {}): Promise<PostRow | undefined> {
  return (await q.query<PostRow>(`SELECT ${COLUMNS('$2')} FROM posts p WHERE p.id = $1${opts.forUpdate ? ' FOR NO KEY UPDATE' : ''}`, [id, viewerId]))[0];
}

export function createPostsService(deps: Deps) {
  const { db } = deps;

  async function likeChange(ctx: Ctx, id: number, like: boolean, ifMatch: IfMatch): Promise<PostRow> {
    return db.transaction(async (tx) => {
      // Locked only to honour If-Match: without one, likes need no lock (the trigger's update serializes counts).
      const post = await findPost(tx, id, ctx.actor.id, { forUpdate: ifMatch !== undefined });
      if (!post) throw notFound('Post');
      checkIfMatch(ifMatch, 'post', id, post.version, POST_VIEWS);
      const changed = like
        ? await tx.query('INSERT INTO post_likes (post_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING 1', [id, ctx.actor.id])
        : await tx.query('DELETE FROM post_likes WHERE post_id = $1 AND user_id = $2 RETURNING 1', [id, ctx.actor.id]);
      const after = (await findPost(tx, id, ctx.actor.id))!;
      if (like && changed.length > 0 && post.author_id !== ctx.actor.id) {
        await notify(tx, ctx.actor.id, [post.author_id], 'post_liked', { post_id: id, actor_id: ctx.actor.id });
        addEvents(tx, [{ name: 'post-liked', room: `user:${post.author_id}`, payload: { post_id: id, user_id: ctx.actor.id, like_count: after.like_count } }]);
      }
      return after;
    });
  }

  return {
    async list(actor: Actor, query: { author_id?: number; limit?: number; cursor?: string }) {
      const page = pageRequest(query);
      const rows = await db.query<PostRow>(
        `SELECT ${COLUMNS('$1')} FROM posts p
          WHERE ($2::bigint IS NULL OR p.author_id = $2) AND ($3::bigint IS NULL OR p.id < $3)
          ORDER BY p.id DESC LIMIT $4`,
        [actor.id, query.author_id ?? null, page.beforeId ?? null, page.limit + 1],
      );
      return { rows, page };
    },

    async get(actor: Actor, id: number): Promise<PostRow> {
      const post = await findPost(db, id, actor.id);
      if (!post) throw notFound('Post');
      return post;
    },

    async create(ctx: Ctx, content: string): Promise<PostRow> {
      const rows = await db.query<{ id: number }>('INSERT INTO posts (author_id, content) VALUES ($1, $2) RETURNING id', [ctx.actor.id, content]);
      return (await findPost(db, rows[0]!.id, ctx.actor.id))!;
    },

    async remove(ctx: Ctx, id: number): Promise<void> {
      const post = await findPost(db, id, ctx.actor.id);
      if (!post) throw notFound('Post');
      if (post.author_id !== ctx.actor.id && ctx.actor.role !== 'ADMIN') throw forbidden('Only the author or an ADMIN may delete a post');
      await db.query('DELETE FROM posts WHERE id = $1', [id]);
    },

    like: (ctx: Ctx, id: number, ifMatch: IfMatch) => likeChange(ctx, id, true, ifMatch),
    unlike: (ctx: Ctx, id: number, ifMatch: IfMatch) => likeChange(ctx, id, false, ifMatch),
  };
}

export type PostsService = ReturnType<typeof createPostsService>;
