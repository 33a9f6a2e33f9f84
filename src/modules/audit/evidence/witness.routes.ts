// GET /audit-logs/witnesses (docs/api.md 4, 5.11): the witness policy in force and each witness's
// state. Registered inside the audit routes' plugin, so the same ADMIN-only hook guards it.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { errorResponses } from '../../../http/schemas.js';
import type { EvidenceService } from './evidence.service.js';
import { WitnessesStatus } from './witness.schemas.js';

export function registerWitnessRoutes(app: FastifyInstance, evidence: EvidenceService): void {
  app.withTypeProvider<TypeBoxTypeProvider>().get('/audit-logs/witnesses', {
    schema: {
      operationId: 'getAuditWitnesses', tags: ['audit'], security: [{ bearer: [] }],
      summary: 'The witness policy and each witness\'s state (ADMIN)',
      description:
        'The C2SP tlog-policy file the service submits its checkpoints under (AUDIT_WITNESS_POLICY), whether the witnesses now cosigning meet its quorum, ' +
        'the newest checkpoint whose cosignatures meet it, and for each witness the largest size it cosigned, when, and why its last submission failed, if it did. ' +
        'Verifiers take the witnesses\' keys from the policy. When no policy is configured the log asks no witness: `policy` is null, `quorum_met` false, ' +
        '`newest_witnessed` null and `witnesses` empty.',
      response: { 200: WitnessesStatus, ...errorResponses(401, 403) },
    },
    handler: () => evidence.witnessing.status(),
  });
}
