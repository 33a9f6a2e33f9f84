// The team feed. Likes are idempotent; like_count is kept by a trigger on post_likes, so it
// is right under concurrent likes and when a liker is deleted.
import type { Actor, ActorContext } from '../../context.js';
import type { Deps } from '../../deps.js';
import { notFound } from '../../domain/errors.js';
import { pageOf, type PageRequest } from '../../domain/page.js';
import { checkVersion, type ExpectedVersion } from '../../domain/versions.js';
import { useCase } from '../../use-cases/runner.js';
import { notify } from '../notifications/notifications.writer.js';
import { postsPolicy } from './posts.policy.js';
import * as repo from './posts.repository.js';
import type { PostRow } from './posts.repository.js';

const CREATE = useCase('posts.create', [], { batch: true });
const DELETE = useCase('posts.delete');
const LIKE = useCase('posts.like', [], { batch: true });

export function createPostsService(deps: Deps) {
  const { db, run } = deps;

  function likeChange(ctx: ActorContext, id: number, like: boolean, expected: ExpectedVersion): Promise<PostRow> {
    return run(ctx, LIKE, async (uow) => {
      const me = ctx.actor.id;
      const post = expected === undefined ? await repo.findPost(uow.tx, id, me) : await repo.lockPost(uow.tx, id, me);
      if (!post) throw notFound('Post');
      checkVersion(expected, post.version);
      const changed = await repo.setLike(uow.tx, id, me, like);
      const after = (await repo.findPost(uow.tx, id, me))!;
      if (like && changed && post.author_id !== me) {
        await notify(uow, [post.author_id], 'post_liked', { post_id: id, actor_id: me });
        uow.emit({ name: 'post-liked', room: `user:${post.author_id}`, payload: { post_id: id, user_id: me, like_count: after.like_count } });
      }
      return after;
    }, { batchKey: `post:${id}` });
  }

  return {
    async list(viewer: Actor, filter: { author_id?: number }, page: PageRequest) {
      return pageOf(await repo.listPosts(db, viewer.id, filter.author_id, page.after, page.limit), page);
    },

    async get(viewer: Actor, id: number): Promise<PostRow> {
      const post = await repo.findPost(db, id, viewer.id);
      if (!post) throw notFound('Post');
      return post;
    },

    create(ctx: ActorContext, content: string): Promise<PostRow> {
      return run(ctx, CREATE, async (uow) => (await repo.findPost(uow.tx, await repo.insertPost(uow.tx, ctx.actor.id, content), ctx.actor.id))!);
    },

    async remove(ctx: ActorContext, id: number): Promise<void> {
      await run(ctx, DELETE, async (uow) => {
        const post = await repo.lockPost(uow.tx, id, ctx.actor.id);
        if (!post) throw notFound('Post');
        uow.authorize(postsPolicy.can('delete', await uow.actor(), { authorId: post.author_id }), 'Post');
        await repo.deletePost(uow.tx, id);
      });
    },

    like: (ctx: ActorContext, id: number, expected: ExpectedVersion) => likeChange(ctx, id, true, expected),
    unlike: (ctx: ActorContext, id: number, expected: ExpectedVersion) => likeChange(ctx, id, false, expected),
  };
}

export type PostsService = ReturnType<typeof createPostsService>;
