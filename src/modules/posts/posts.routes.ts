import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { API_PREFIX } from '../../http/conventions.js';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { expectedVersion, versionEtag } from '../../http/preconditions.js';
import { authedContext } from '../../http/request-context.js';
import { Id, IdParams, IfMatchHeader, NoContent, Page, PageQuery, Text, Timestamp, errorResponses } from '../../http/schemas.js';
import { POST_VIEWS, postView, presentPost } from './posts.presenter.js';
import type { PostRow } from './posts.repository.js';
import type { PostsService } from './posts.service.js';

const security = [{ bearer: [] }];
const ifMatch = IfMatchHeader('post');
const Post = Type.Object({
  id: Type.Integer(),
  author_id: Type.Integer(),
  content: Type.String(),
  like_count: Type.Integer(),
  liked_by_me: Type.Boolean(),
  created_at: Timestamp,
});
const postEtag = (p: PostRow) => versionEtag('post', p.id, p.version, postView(p));

export const postsRoutes: FastifyPluginAsyncTypebox<{ posts: PostsService }> = async (app, { posts }) => {
  app.get('/posts', {
    schema: {
      tags: ['posts'], summary: 'The team feed, newest first', security,
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
      tags: ['posts'], summary: 'Post to the feed', security,
      body: Type.Object({ content: Text(5000) }, { additionalProperties: false }),
      response: { 201: Post, ...errorResponses(400, 401) },
    },
    handler: async (request, reply) => {
      const post = await posts.create(authedContext(request), request.body.content);
      reply.code(201).header('location', `${API_PREFIX}/posts/${post.id}`);
      return presentPost(post);
    },
  });

  app.get('/posts/:id', {
    schema: { tags: ['posts'], summary: 'A post', security, params: IdParams, response: { 200: Post, ...errorResponses(400, 401, 404) } },
    handler: async (request, reply) => {
      const post = await posts.get(authedContext(request).actor, request.params.id);
      reply.header('etag', postEtag(post));
      return presentPost(post);
    },
  });

  app.delete('/posts/:id', {
    schema: { tags: ['posts'], summary: 'Delete a post (its author or an ADMIN)', security, params: IdParams, response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) } },
    handler: async (request, reply) => {
      await posts.remove(authedContext(request), request.params.id);
      return reply.code(204).send(null);
    },
  });

  app.put('/posts/:id/like', {
    schema: { tags: ['posts'], summary: 'Like a post (idempotent)', security, params: IdParams, headers: ifMatch, response: { 200: Post, ...errorResponses(400, 401, 404, 412) } },
    handler: async (request, reply) => {
      const post = await posts.like(authedContext(request), request.params.id, expectedVersion(request, 'post', request.params.id, POST_VIEWS));
      reply.header('etag', postEtag(post));
      return presentPost(post);
    },
  });

  app.delete('/posts/:id/like', {
    schema: { tags: ['posts'], summary: 'Take back a like (idempotent)', security, params: IdParams, headers: ifMatch, response: { 200: Post, ...errorResponses(400, 401, 404, 412) } },
    handler: async (request, reply) => {
      const post = await posts.unlike(authedContext(request), request.params.id, expectedVersion(request, 'post', request.params.id, POST_VIEWS));
      reply.header('etag', postEtag(post));
      return presentPost(post);
    },
  });
};
