import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { authedContext } from '../../http/request-context.js';
import { Page, PageQuery, errorResponses } from '../../http/schemas.js';
import { presentMessage } from './messages.presenter.js';
import { Message, MessageBody, Room } from './messages.schemas.js';
import { MAX_MESSAGES_PER_SECOND } from './messages.limit.js';
import type { MessagesService } from './messages.service.js';

const security = [{ bearer: [] }];

export const messagesRoutes: FastifyPluginAsyncTypebox<{ messages: MessagesService }> = async (app, { messages }) => {
  app.get('/messages', {
    schema: {
      operationId: 'listMessages', tags: ['messages'], summary: "A room's messages, newest first (cursor pages back)",
      description: '`general` is every user\'s; `project:<id>` is that project\'s members\' (anyone else: 404).',
      security,
      querystring: Type.Object({ room: Type.Optional(Room), ...PageQuery }, { additionalProperties: false }),
      response: { 200: Page(Message), ...errorResponses(400, 401, 404) },
    },
    handler: async (request, reply) => {
      const { room = 'general', ...page } = request.query;
      return sendPage(request, reply, await messages.list(authedContext(request).actor, room, pageRequest(page)), (ms) => ms.map(presentMessage));
    },
  });

  app.post('/messages', {
    schema: {
      operationId: 'createMessage', tags: ['messages'], summary: 'Send a message to a room you may use (default general)', security,
      description:
        'Answers 201 with the stored message but no Location header: messages have no URL of their own; read them with GET /messages?room=. ' +
        `A user sends at most ${MAX_MESSAGES_PER_SECOND} messages a second (any 1000 ms), counted together with the new-message events of ` +
        'all their sockets and on every instance: beyond it 429 RATE_LIMITED with Retry-After, and nothing is stored.',
      body: MessageBody,
      response: { 201: Message, ...errorResponses(400, 401, 404, 429) },
    },
    handler: async (request, reply) => {
      const message = await messages.postMessage(authedContext(request), request.body);
      reply.code(201);
      return presentMessage(message);
    },
  });
};
