import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { API_PREFIX } from '../../http/conventions.js';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { expectedVersion, versionEtag } from '../../http/preconditions.js';
import { authedContext } from '../../http/request-context.js';
import { Count, Id, IdParams, IfMatchHeader, NoContent, Page, PageQuery, Text, Timestamp, errorResponses, named } from '../../http/schemas.js';
import { POST_VIEWS, postView, presentPost } from './posts.presenter.js';
import type { PostRow } from './posts.repository.js';
import type { PostsService } from './posts.service.js';

const security = [{ bearer: [] }];
const ifMatch = IfMatchHeader('post');
const Post = named(
  'Post',
  Type.Object({
    id: Id,
    author_id: Id,
    content: Text(5000),
    like_count: Count(),
    liked_by_me: Type.Boolean({ description: 'Whether the caller likes it' }),
    created_at: Timestamp,
  }),
  { id: 204, author_id: 7, content: 'The new landing page is live. Thanks, everyone!', like_count: 3, liked_by_me: true, created_at: '2026-11-22T16:00:41.902Z' },
);
const PostBody = named('CreatePostRequest', Type.Object({ content: Text(5000) }, { additionalProperties: false }), {
  content: 'The new landing page is live. Thanks, everyone!',
});
const postEtag = (p: PostRow) => versionEtag('post', p.id, p.version, postView(p));

export const postsRoutes: FastifyPluginAsyncTypebox<{ posts: PostsService }> = async (app, { posts }) => {
  app.get('/posts', {
    schema: {
      operationId: 'listPosts', tags: ['posts'], summary: 'The team feed, newest first',
      description: 'Any authenticated user; `author_id` narrows it to one author.',
      security,
      querystring: Type.Object({ author_id: Type.Optional(Id), ...PageQuery }, { additionalProperties: false }),
      response: { 200: Page(Post), ...errorResponses(400, 401) },
    },
    handler: async (request, reply) => {
      const { limit, cursor, ...filter } = request.query;
      const page = await posts.list(authedContext(request).actor, filter, pageRequest({ limit, cursor }));
      return sendPage(request, reply, page, (ps) => ps.map(presentPost));
    },
  });

  app.post('/posts', {
    schema: {
      operationId: 'createPost', tags: ['posts'], summary: 'Post to the feed',
      description: 'Any authenticated user.',
      security, body: PostBody,
      'x-response-headers': { 201: ['Location'] },
      response: { 201: Post, ...errorResponses(400, 401) },
    },
    handler: async (request, reply) => {
      const post = await posts.create(authedContext(request), request.body.content);
      reply.code(201).header('location', `${API_PREFIX}/posts/${post.id}`);
      return presentPost(post);
    },
  });

  app.get('/posts/:id', {
    schema: {
      operationId: 'getPost', tags: ['posts'], summary: 'A post',
      description: 'Any authenticated user. `liked_by_me` makes two views of one version, with different ETags.',
      security, params: IdParams, response: { 200: Post, ...errorResponses(400, 401, 404) },
    },
    handler: async (request, reply) => {
      const post = await posts.get(authedContext(request).actor, request.params.id);
      reply.header('etag', postEtag(post));
      return presentPost(post);
    },
  });

  app.delete('/posts/:id', {
    schema: {
      operationId: 'deletePost', tags: ['posts'], summary: 'Delete a post (its author or an ADMIN)',
      description: 'Its author or an ADMIN; anyone else gets 403. Its likes go with it.',
      security, params: IdParams, response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      await posts.remove(authedContext(request), request.params.id);
      return reply.code(204).send(null);
    },
  });

  app.put('/posts/:id/like', {
    schema: {
      operationId: 'likePost', tags: ['posts'], summary: 'Like a post (idempotent)',
      description: "Any authenticated user. Liking a post you already like changes nothing; a new like notifies the post's author.",
      security, params: IdParams, headers: ifMatch, response: { 200: Post, ...errorResponses(400, 401, 404, 412) },
    },
    handler: async (request, reply) => {
      const post = await posts.like(authedContext(request), request.params.id, expectedVersion(request, 'post', request.params.id, POST_VIEWS));
      reply.header('etag', postEtag(post));
      return presentPost(post);
    },
  });

  app.delete('/posts/:id/like', {
    schema: {
      operationId: 'unlikePost', tags: ['posts'], summary: 'Take back a like (idempotent)',
      description: "Any authenticated user. Taking back a like you do not have changes nothing.",
      security, params: IdParams, headers: ifMatch, response: { 200: Post, ...errorResponses(400, 401, 404, 412) },
    },
    handler: async (request, reply) => {
      const post = await posts.unlike(authedContext(request), request.params.id, expectedVersion(request, 'post', request.params.id, POST_VIEWS));
      reply.header('etag', postEtag(post));
      return presentPost(post);
    },
  });
};
