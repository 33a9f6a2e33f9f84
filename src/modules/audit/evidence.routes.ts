// The audit log's evidence over HTTP (API.md 4, audit log): verification, the newest signed
// checkpoint, RFC 6962 proofs, the public keys, and the export. Registered inside the audit
// routes' plugin, so the same ADMIN-only hook guards them.
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { authedContext } from '../../http/request-context.js';
import { IdParams, errorResponses } from '../../http/schemas.js';
import type { ProducesConfig } from '../../http/conventions.js';
import type { AuditService } from './audit.service.js';
import { CheckpointJson, ConsistencyProof, ConsistencyQuery, ExportQuery, InclusionProof, ProofQuery, PublicKey, VerifyReport } from './evidence.schemas.js';
import type { EvidenceService } from './integrity/evidence.service.js';

const security = [{ bearer: [] }];
const tags = ['audit'];

/** What the docs page shows of an export (OpenAPI only). */
const EXPORT_EXAMPLE = {
  ndjson:
    '{"type":"record","record":{"id":1042,"action":"CHANGE_USER_ROLE","…":"…"},"sealed":{"…":"…"},"seq":1041,' +
    '"leaf_hash":"n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=","audit_path":["Vd3sM2Yk5dVw1Xb8o0b0V9QmUuJt0n8rQ6bq0X0zS1A="]}\n' +
    '{"type":"checkpoint","origin":"teamlog.example.com/audit","tree_size":1042,"…":"…"}\n',
  csv:
    'id,timestamp,actor_id,action,resource_type,resource_id,result,ip,user_agent,request_id,metadata,seq,leaf_hash\r\n' +
    '1042,2026-11-22T08:15:30.512Z,1,CHANGE_USER_ROLE,USER,7,SUCCESS,203.0.113.24,curl/8.5.0,0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90,' +
    '"{""oldRole"":""USER"",""newRole"":""ADMIN""}",1041,n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=\r\n',
};

/** Whether the client asked for the signed note itself rather than JSON. */
const wantsNote = (accept: string | undefined) => !!accept && /(^|,)\s*text\/plain/i.test(accept) && !/application\/json/i.test(accept);

export function registerEvidenceRoutes(app: FastifyInstance, audit: AuditService, evidence: EvidenceService): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.get('/audit-logs/verify', {
    schema: {
      operationId: 'verifyAuditLog', tags, security,
      summary: 'Verify the audit log against its signed checkpoints (ADMIN)',
      description:
        'Recomputes every sealed record\'s RFC 6962 leaf, rebuilds the tree and checks every signed checkpoint on the way; ' +
        'the newest must verify under this service\'s key. `ok: false` names the first bad record and the problem. ' +
        'Reads in chunks: on a large log this takes seconds (about 100,000 records a second).',
      response: { 200: VerifyReport, ...errorResponses(401, 403) },
    },
    handler: () => evidence.verify(),
  });

  api.get('/audit-logs/checkpoints/latest', {
    config: { produces: ['text/plain'] } satisfies ProducesConfig,
    schema: {
      operationId: 'getLatestCheckpoint', tags, security,
      summary: 'The newest signed checkpoint (ADMIN)',
      description: 'A C2SP tlog-checkpoint signed with Ed25519. With `Accept: text/plain`, the signed note itself, as note verifiers and witnesses take it. 404 until the first records are sealed.',
      response: { 200: CheckpointJson, ...errorResponses(401, 403, 404) },
    },
    handler: async (request, reply) => {
      const checkpoint = await evidence.latestCheckpoint();
      // The note is text, not the JSON body the schema types: sent as it is, past the serializer.
      if (wantsNote(request.headers.accept)) return reply.type('text/plain; charset=utf-8').send(checkpoint.note as never);
      return checkpoint;
    },
  });

  api.get('/audit-logs/public-keys', {
    schema: {
      operationId: 'listAuditPublicKeys', tags, security,
      summary: 'Every key that signed checkpoints, old ones included (ADMIN)',
      description: 'Each as SPKI PEM and as a C2SP signed-note verifier key, so that tools nobody here wrote verify the checkpoints.',
      response: { 200: Type.Array(PublicKey, { maxItems: 1000 }), ...errorResponses(401, 403) },
    },
    handler: () => evidence.publicKeys(),
  });

  api.get('/audit-logs/proofs/consistency', {
    schema: {
      operationId: 'getConsistencyProof', tags, security,
      summary: 'RFC 6962 consistency proof between two tree sizes (ADMIN)',
      description: 'So that the holder of an old checkpoint checks that a newer one extends it. 1 ≤ from ≤ to ≤ the number of sealed records.',
      querystring: ConsistencyQuery,
      response: { 200: ConsistencyProof, ...errorResponses(400, 401, 403) },
    },
    handler: (request) => evidence.consistencyProof(request.query.from, request.query.to),
  });

  api.get('/audit-logs/:id/proof', {
    schema: {
      operationId: 'getInclusionProof', tags, security,
      summary: 'RFC 6962 inclusion proof of one record (ADMIN)',
      description: 'Against the tree of `tree_size` records (default: the newest checkpoint\'s). 404 until the record is sealed and covered by a checkpoint.',
      params: IdParams,
      querystring: ProofQuery,
      response: { 200: InclusionProof, ...errorResponses(400, 401, 403, 404) },
    },
    handler: (request) => evidence.inclusionProof(request.params.id, request.query.tree_size),
  });

  api.get('/audit-logs/export', {
    config: { produces: ['application/x-ndjson', 'text/csv'] } satisfies ProducesConfig,
    schema: {
      operationId: 'exportAuditLog', tags, security,
      summary: 'Export the audit log, filtered, with its proofs (ADMIN)',
      description:
        'Streams the whole result in constant memory; writes one EXPORT_AUDIT_LOG record first. NDJSON: a line ' +
        '`{type: "record", record, sealed, seq, leaf_hash, audit_path}` per record covered by the newest checkpoint, in seq order; ' +
        'then records not covered yet (seq null, no proof); last `{type: "checkpoint", …, export: {filters, records}}`. ' +
        'Lines are compact JSON but for `metadata`, which keeps PostgreSQL\'s jsonb spacing and key order (`{"key": "value"}`): ' +
        'whitespace and key order carry nothing (a leaf is over the canonical form), so parse lines rather than match bytes. ' +
        'Check it offline with `npx teamlog audit verify --file export.ndjson --public-key key.pem`. CSV: one row per record, ' +
        'cells starting with = + - @ tab or CR prefixed with an apostrophe. The right is checked again before each block is read: ' +
        'if the session is revoked or its user is no longer an ADMIN, the response is cut off (NDJSON: without its checkpoint line).',
      querystring: ExportQuery,
      response: {
        200: {
          description: 'The export, streamed',
          content: {
            'application/x-ndjson': { schema: { type: 'string' }, example: EXPORT_EXAMPLE.ndjson },
            'text/csv': { schema: { type: 'string' }, example: EXPORT_EXAMPLE.csv },
          },
        },
        ...errorResponses(400, 401, 403),
      },
    },
    handler: async (request, reply) => {
      const { format = 'ndjson', ...filters } = request.query;
      await audit.recordExport(authedContext(request), format, filters);
      reply.type(format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8');
      reply.header('content-disposition', `attachment; filename="audit-log.${format}"`);
      // A stream is piped as it is read (backpressure), past the serializer.
      return reply.send(evidence.exportStream(filters, format, authedContext(request).actor) as never);
    },
  });
}
