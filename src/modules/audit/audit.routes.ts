import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Database } from '../../db/database.js';
import { forbidden, notFound } from '../../http/errors.js';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { authedContext } from '../../http/request-context.js';
import { IdParams, Page, errorResponses } from '../../http/schemas.js';
import { findAuditRecord, queryAuditLog, resolvePersonalData } from './audit.queries.js';
import { AuditQuery, AuditRecord } from './audit.schemas.js';

const security = [{ bearer: [] }];

export const auditRoutes: FastifyPluginAsyncTypebox<{ db: Database }> = async (app, { db }) => {
  // The audit log is for ADMINs only; checked once for every route of this plugin.
  app.addHook('preHandler', async (request) => {
    if (authedContext(request).actor.role !== 'ADMIN') throw forbidden('The audit log is for ADMINs only');
  });

  app.get('/audit-logs', {
    schema: {
      tags: ['audit'],
      summary: 'Search the audit log (ADMIN)',
      description: 'Newest first, keyset-paginated. Filters combine with AND; action is repeatable (OR).',
      security,
      querystring: AuditQuery,
      response: { 200: Page(AuditRecord), ...errorResponses(400, 401, 403) },
    },
    handler: async (request, reply) => {
      const page = pageRequest(request.query);
      const rows = await queryAuditLog(db, request.query, page.beforeId, page.limit);
      return sendPage(request, reply, rows, page, (records) => resolvePersonalData(db, records));
    },
  });

  app.get('/audit-logs/:id', {
    schema: { tags: ['audit'], summary: 'One audit record (ADMIN)', security, params: IdParams, response: { 200: AuditRecord, ...errorResponses(400, 401, 403, 404) } },
    handler: async (request) => {
      const record = await findAuditRecord(db, request.params.id);
      if (!record) throw notFound('Audit record');
      // The ETag is a hash of the body: a record never changes, but its personal data may be erased.
      return (await resolvePersonalData(db, [record]))[0];
    },
  });
};
