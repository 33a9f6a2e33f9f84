import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { authedContext } from '../../http/request-context.js';
import { createScanSlots } from '../../http/scan-slots.js';
import type { Collector } from '../../process/full-collection.js';
import { IdParams, errorResponses } from '../../http/schemas.js';
import { requireAuditor } from './audit.policy.js';
import { AuditListPage, AuditListQuery, AuditRecord, AuditStats, AuditStatsQuery } from './audit.schemas.js';
import type { AuditService } from './audit.service.js';
import { registerEvidenceRoutes } from './evidence/evidence.routes.js';
import type { EvidenceService } from './evidence/evidence.service.js';

const security = [{ bearer: [] }];

export interface AuditRoutesOptions {
  audit: AuditService;
  evidence: EvidenceService;
  /** MAX_CONCURRENT_AUDIT_SCANS: exports and verifications this instance runs at once. */
  maxConcurrentScans: number;
  /** A test's pause while a scan holds its slot (Deps.testHooks.whileScanHolds); none in production. */
  scanPause?: (kind: 'export' | 'verify') => Promise<void>;
  /** A test's full collections after the scans (Deps.testHooks.scanCollector); the process's in production. */
  scanCollector?: Collector;
}

export const auditRoutes: FastifyPluginAsyncTypebox<AuditRoutesOptions> = async (app, { audit, evidence, maxConcurrentScans, scanPause, scanCollector }) => {
  // The audit log is for ADMINs only; checked once for every route of this plugin, before the
  // query is validated: anyone else is refused the same way whatever they send.
  app.addHook('preValidation', async (request) => {
    requireAuditor(authedContext(request).actor);
  });

  app.get('/audit-logs', {
    schema: {
      operationId: 'listAuditLogs',
      tags: ['audit'],
      summary: 'Search the audit log (ADMIN)',
      description:
        'Newest first, keyset-paginated. Filters combine with AND; action is repeatable (OR). `q` searches with the syntax its description gives ' +
        '(`actor:12 -result:SUCCESS created:>=2026-11-01`); a query the syntax refuses is 400 INVALID_QUERY, its `detail` quoting the term. ' +
        '`include=actors` adds beside `data` an `actors` object naming the page\'s actors (`{"<id>": {email, name}}`); without it the answer is `{data, next_cursor}`.',
      security,
      querystring: AuditListQuery,
      response: { 200: AuditListPage, ...errorResponses(400, 401, 403) },
    },
    handler: async (request, reply) => {
      const { limit, cursor, include, ...filters } = request.query;
      const page = await audit.search(filters, pageRequest({ limit, cursor }));
      const body = await sendPage(request, reply, page, (records) => records);
      // Only when asked: without it the answer is the plain page, as it always was.
      return include === 'actors' ? { ...body, actors: await audit.actorsOf(page.items) } : body;
    },
  });

  app.get('/audit-logs/stats', {
    schema: {
      operationId: 'getAuditStats',
      tags: ['audit'],
      summary: 'Activity counts of an audit search (ADMIN)',
      description:
        'The records the list would give for the same filters and `q`, counted per UTC hour or day of the window (every bucket present, 0 when empty), ' +
        'with the 10 most frequent actions and actors and the total. The window is the query\'s time range (`from`/`to` and `created:`), ending now at the ' +
        'latest; without a start it begins 30 days before its end, at the start of that hour or day (`from` and `to` say which window was counted). A window wider than 31 days of hours or 1,000 days is 400 WINDOW_TOO_WIDE. ' +
        'Answered from indexes (docs/audit-search.md, "Activity counts").',
      security,
      querystring: AuditStatsQuery,
      response: { 200: AuditStats, ...errorResponses(400, 401, 403) },
    },
    handler: (request) => {
      const { interval, ...filters } = request.query;
      return audit.stats(filters, interval);
    },
  });

  registerEvidenceRoutes(app, audit, evidence, createScanSlots(maxConcurrentScans, app.metrics, scanPause, scanCollector));

  app.get('/audit-logs/:id', {
    // The ETag is a hash of the body: a record never changes, but its personal data may be erased.
    schema: {
      operationId: 'getAuditLog', tags: ['audit'], summary: 'One audit record (ADMIN)',
      description: 'ADMIN only. Its ETag is a hash of the body: a record never changes, but its personal data may be erased.',
      security, params: IdParams, response: { 200: AuditRecord, ...errorResponses(400, 401, 403, 404) },
    },
    handler: (request) => audit.get(request.params.id),
  });
};
