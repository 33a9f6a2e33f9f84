import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { authedContext } from '../../http/request-context.js';
import { createScanSlots } from '../../http/scan-slots.js';
import { IdParams, Page, errorResponses } from '../../http/schemas.js';
import { requireAuditor } from './audit.policy.js';
import { AuditQuery, AuditRecord } from './audit.schemas.js';
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
}

export const auditRoutes: FastifyPluginAsyncTypebox<AuditRoutesOptions> = async (app, { audit, evidence, maxConcurrentScans, scanPause }) => {
  // The audit log is for ADMINs only; checked once for every route of this plugin.
  app.addHook('preHandler', async (request) => {
    requireAuditor(authedContext(request).actor);
  });

  app.get('/audit-logs', {
    schema: {
      operationId: 'listAuditLogs',
      tags: ['audit'],
      summary: 'Search the audit log (ADMIN)',
      description:
        'Newest first, keyset-paginated. Filters combine with AND; action is repeatable (OR). `q` searches with the syntax its description gives ' +
        '(`actor:12 -result:SUCCESS created:>=2026-11-01`); a query the syntax refuses is 400 INVALID_QUERY, its `detail` quoting the term.',
      security,
      querystring: AuditQuery,
      response: { 200: Page(AuditRecord), ...errorResponses(400, 401, 403) },
    },
    handler: async (request, reply) => {
      const { limit, cursor, ...filters } = request.query;
      const page = await audit.search(filters, pageRequest({ limit, cursor }));
      return sendPage(request, reply, page, (records) => records);
    },
  });

  registerEvidenceRoutes(app, audit, evidence, createScanSlots(maxConcurrentScans, app.metrics, scanPause));

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
