// The audit log's evidence over HTTP (docs/api.md 4, audit log): verification, the newest signed
// checkpoint, RFC 6962 proofs, the public keys, and the export. Registered inside the audit
// routes' plugin, so the same ADMIN-only hook guards them.
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { authedContext } from '../../../http/request-context.js';
import { IdParams, errorResponses } from '../../../http/schemas.js';
import type { ProducesConfig } from '../../../http/conventions.js';
import { SCAN_RETRY_AFTER_SECONDS, type ScanSlots } from '../../../http/scan-slots.js';
import { checkedSearch, type AuditService } from '../audit.service.js';
import { CheckpointJson, ConsistencyProof, ConsistencyQuery, ExportQuery, InclusionProof, ProofQuery, PublicKey, TilePathParams, VerifyReport } from './evidence.schemas.js';
import type { EvidenceService } from './evidence.service.js';
import { parseTilePath } from '../../../tlog/tiles.js';
import { invalid } from '../../../domain/errors.js';
import { registerWitnessRoutes } from './witness.routes.js';

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
  ocsf:
    '{"class_uid":3001,"class_name":"Account Change","category_uid":3,"activity_id":7,"activity_name":"Attach Policy","type_uid":300107,' +
    '"severity_id":1,"status_id":1,"time":1795335330512,"message":"User 1 changed the role of user 7.","metadata":{"version":"1.8.0",' +
    '"product":{"name":"Teamlog","vendor_name":"Teamlog","version":"0.1.0"},"uid":"1042","correlation_uid":"0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90"},' +
    '"actor":{"user":{"uid":"1"}},"src_endpoint":{"ip":"203.0.113.24"},"user":{"uid":"7","type_id":1,"type":"User"},"policy":{"name":"ADMIN","type":"role"},' +
    '"unmapped":{"id":1042,"seq":1041,"leaf_hash":"n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=","audit_path":["…"],"tree_size":1042,"sealed":{"…":"…"},' +
    '"checkpoint":{"origin":"teamlog.example.com/audit","tree_size":1042,"…":"…"}}}\n',
};

const CHECKPOINT_NOTE_EXAMPLE =
  'teamlog.example.com/audit\n1042\nn4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=\ntime 2026-11-22T08:15:35.000Z\n' +
  'prev Vd3sM2Yk5dVw1Xb8o0b0V9QmUuJt0n8rQ6bq0X0zS1A=\n\n— teamlog.example.com/audit obLD1BzSJFlIxWuxKwY12E7VLpK03yh2GhY0giL/+79WMHflTwBR+fLVL7bHv6bIyxEy0083higdI/hrR2eHCMijtLA=\n';

const TLOG_PROOF_EXAMPLE =
  'c2sp.org/tlog-proof@v1\nextra eyJhY3Rpb24iOiJDSEFOR0VfVVNFUl9ST0xFIiwi4oCmIjoi4oCmIn0=\nindex 1041\nVd3sM2Yk5dVw1Xb8o0b0V9QmUuJt0n8rQ6bq0X0zS1A=\n\n' +
  CHECKPOINT_NOTE_EXAMPLE;

/** What the export and verification routes say of MAX_CONCURRENT_AUDIT_SCANS (OpenAPI only). */
const SCAN_LIMIT =
  ' At most MAX_CONCURRENT_AUDIT_SCANS exports and verifications (default 2) run at once on an instance: one more is refused ' +
  `with 429 RATE_LIMITED and Retry-After (${SCAN_RETRY_AFTER_SECONDS} s) rather than queued, so that no administrator starves the other users.`;

/** An export's Content-Type: OCSF events are NDJSON too. */
const exportType = (format: string) => (format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8');

/** `attachment; filename=…`: audit-log.ndjson, audit-log.csv, and audit-log.ocsf.ndjson (what the file holds, then how it is written). */
const exportDisposition = (format: string) => `attachment; filename="audit-log.${format === 'ocsf' ? 'ocsf.ndjson' : format}"`;

/** Whether the client asked for the signed note itself rather than JSON. */
const wantsNote = (accept: string | undefined) => !!accept && /(^|,)\s*text\/plain/i.test(accept) && !/application\/json/i.test(accept);

export function registerEvidenceRoutes(app: FastifyInstance, audit: AuditService, evidence: EvidenceService, scans: ScanSlots): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  registerWitnessRoutes(app, evidence);

  api.get('/audit-logs/verify', {
    schema: {
      operationId: 'verifyAuditLog', tags, security,
      summary: 'Verify the audit log against its signed checkpoints (ADMIN)',
      description:
        'Recomputes every sealed record\'s RFC 6962 leaf, rebuilds the tree, holds every stored tile to the tile the records make, and ' +
        'checks every signed checkpoint on the way; the newest must verify under this service\'s key. It also finds a record sealed twice, ' +
        'and one the sealer took but never sealed. `ok` is about integrity: `ok: false` names the first bad record (`first_bad_id`) or the first bad ' +
        'stored tile (`first_bad_tile`), and the problem (`problem`). What could not be checked is said apart, in `not_checked`, and never makes ' +
        '`ok` false: when sealing has stopped (records waiting longer than AUDIT_SEAL_STALL_MS with no seal made meanwhile; `/health/ready` answers ' +
        '`degraded`), the records waiting have nothing to be checked against yet, so the answer is `ok: true` when everything before them verified, ' +
        'with `first_unsealed_id` and a `not_checked` entry (reason `sealing_stopped`) naming the first of them. ' +
        'Reads in chunks: on a large log this takes seconds (about 100,000 records a second).' + SCAN_LIMIT +
        ' A verification holds its slot until it ends, even when its client has gone. HEAD answers the headers only, without verifying.',
      response: { 200: VerifyReport, ...errorResponses(401, 403, 429) },
    },
    handler: async (request, reply) => {
      // HEAD: the headers only, without a verification (Fastify's HEAD would run one and drop its answer).
      if (request.method === 'HEAD') return reply.type('application/json; charset=utf-8').send(undefined as never);
      const release = scans.take('verify');
      try {
        await scans.holding('verify');
        return await evidence.verify({ lowPriority: true });
      } finally {
        release();
      }
    },
  });

  api.get('/audit-logs/checkpoints/latest', {
    config: { produces: ['text/plain'] } satisfies ProducesConfig,
    schema: {
      operationId: 'getLatestCheckpoint', tags, security,
      summary: 'The newest signed checkpoint (ADMIN)',
      description:
        'A C2SP tlog-checkpoint signed with Ed25519. With `Accept: text/plain`, the signed note itself, as note verifiers and witnesses take it. 404 until the first records are sealed. ' +
        'The note carries, after the log\'s own signature line, the cosignature lines that witnesses returned for it (AUDIT_WITNESS_POLICY), ' +
        '`cosignatures` lists them, and `witnessed` says whether they meet the policy\'s quorum.',
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
    config: { produces: ['text/plain'] } satisfies ProducesConfig,
    schema: {
      operationId: 'getInclusionProof', tags, security,
      summary: 'RFC 6962 inclusion proof of one record (ADMIN)',
      description:
        'Against the tree of `tree_size` records (default: the newest checkpoint\'s), with the record\'s sealed form (`sealed`), from which a client ' +
        'recomputes the leaf (SHA-256 of 0x00 and its RFC 8785 canonical JSON). 404 until the record is sealed and covered by a checkpoint. ' +
        'Every proof is checked before it is served: the stored tree at `tree_size` must extend, or be extended by, the newest signed checkpoint, ' +
        'and the proof must lead to its root; a record or a stored tree changed behind the service\'s back is 409 CONFLICT, never a proof that fails. ' +
        'With `format=tlog-proof`, a C2SP tlog-proof (c2sp.org/tlog-proof@v1), text/plain, checked with nothing else than a tlog-policy: `extra` is the base64 of ' +
        'the record\'s entry (the RFC 8785 bytes of its sealed form), `index` its seq, then the inclusion path, a blank line and the checkpoint\'s signed note ' +
        'with its cosignatures; against the checkpoint of `tree_size` records, or by default the one GET /audit-logs/tlog/checkpoint serves (the newest ' +
        'witnessed one when a witness policy is set: 404 until one covers the record).',
      params: IdParams,
      querystring: ProofQuery,
      response: {
        200: {
          description: 'The proof: JSON, or with format=tlog-proof a C2SP tlog-proof',
          content: {
            'application/json': { schema: InclusionProof },
            'text/plain': { schema: { type: 'string', maxLength: 32_768 }, example: TLOG_PROOF_EXAMPLE },
          },
        },
        ...errorResponses(400, 401, 403, 404, 409),
      },
    },
    handler: async (request, reply) => {
      const { tree_size: treeSize, format } = request.query;
      if (format === 'tlog-proof') {
        const proof = await evidence.tlogProof(request.params.id, treeSize);
        // Text, not the JSON body the schema types: sent as it is, past the serializer.
        return reply.type('text/plain; charset=utf-8').send(proof as never);
      }
      return evidence.inclusionProof(request.params.id, treeSize);
    },
  });

  api.get('/audit-logs/tlog/checkpoint', {
    config: { produces: ['text/plain'] } satisfies ProducesConfig,
    schema: {
      operationId: 'getTlogCheckpoint', tags, security,
      summary: 'The newest checkpoint\'s signed note, as C2SP tlog-tiles serves it (ADMIN)',
      description:
        'The `checkpoint` of a tiled log (c2sp.org/tlog-tiles), text/plain, with the witnesses\' cosignature lines after the log\'s signature line. Without a ' +
        'witness policy, the same note as GET /audit-logs/checkpoints/latest; with one (AUDIT_WITNESS_POLICY), the newest checkpoint whose cosignatures meet ' +
        'its quorum, which may be older than the newest. 404 until the first records are sealed, or with a policy until a checkpoint is witnessed.',
      response: {
        200: {
          description: 'A C2SP tlog-checkpoint signed note',
          content: { 'text/plain': { schema: { type: 'string', maxLength: 16_384 }, example: CHECKPOINT_NOTE_EXAMPLE } },
        },
        ...errorResponses(401, 403, 404),
      },
    },
    handler: async (_request, reply) => reply.type('text/plain; charset=utf-8').send((await evidence.checkpointNote()) as never),
  });

  api.get('/audit-logs/tlog/tile/*', {
    config: { produces: ['application/octet-stream'] } satisfies ProducesConfig,
    schema: {
      operationId: 'getTlogTile', tags, security,
      summary: 'A C2SP tlog-tiles hash tile or entry bundle (ADMIN)',
      description:
        '`tile/<L>/<N>[.p/<W>]`: the W (256 without `.p/W`) 32-byte hashes of tree level 8·L from node N·256, N written as tlog-tiles writes it ' +
        '(`x001/x234/067`). `tile/entries/<N>[.p/<W>]`: records seq N·256 … N·256+W−1, each a big-endian uint16 length and the RFC 8785 bytes of ' +
        'its sealed form (its leaf is SHA-256 of 0x00 and them). A full tile never changes (cached a year, immutable); a partial one is served for ' +
        'any width the sealed tree holds, 404 beyond it. Check tiles against a checkpoint: GET /audit-logs/tlog/checkpoint.',
      params: TilePathParams,
      response: {
        200: {
          description: 'The tile\'s bytes: 32 a hash, or for an entry bundle a 2-byte length before each record\'s canonical JSON',
          content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary', maxLength: 16_777_728 }, example: '(256 × 32 bytes: the hashes, back to back)' } },
        },
        ...errorResponses(400, 401, 403, 404, 409),
      },
    },
    handler: async (request, reply) => {
      const path = parseTilePath(`tile/${request.params['*']}`);
      if (!path) throw invalid('/path', 'must be a tlog-tiles tile path: tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>], N as x001/x234/067');
      const { bytes, full } =
        path.level === 'entries' ? await evidence.entries(path.index, path.width) : await evidence.tile(path.level, path.index, path.width);
      reply.header('cache-control', full ? 'private, max-age=31536000, immutable' : 'private, no-cache');
      reply.header('etag', `"${createHash('sha1').update(bytes).digest('base64url')}"`);
      return reply.type('application/octet-stream').send(bytes as never);
    },
  });

  api.get('/audit-logs/export', {
    config: { produces: ['application/x-ndjson', 'text/csv'] } satisfies ProducesConfig,
    schema: {
      operationId: 'exportAuditLog', tags, security,
      summary: 'Export the audit log, filtered, with its proofs (ADMIN)',
      description:
        'Streams the whole result in constant memory; writes one EXPORT_AUDIT_LOG record first. NDJSON: a line ' +
        '`{type: "record", record, sealed, seq, leaf_hash, audit_path}` per record covered by the newest checkpoint, in seq order; ' +
        'then records not covered yet (seq null, no proof); last `{type: "checkpoint", …, export: {filters, records}}`, its note carrying the witnesses\' ' +
        'cosignatures (with a witness policy, the checkpoint is the newest witnessed one while there is one). ' +
        'Lines are compact JSON but for `metadata`, which keeps PostgreSQL\'s jsonb spacing and key order (`{"key": "value"}`): ' +
        'whitespace and key order carry nothing (a leaf is over the canonical form), so parse lines rather than match bytes. ' +
        'Check it offline with `npx teamlog audit verify --file export.ndjson --public-key key.pem`. CSV: one row per record, ' +
        'cells starting with = + - @ tab or CR prefixed with an apostrophe. OCSF (`format=ocsf`, for a SIEM): the same records in the same order, ' +
        'NDJSON again, each line an OCSF 1.8 event: Authentication (3002) for logins, logouts and revoked sessions, Account Change (3001) for what is ' +
        'done to an account (created, deleted, activated, deactivated, its role, password or email changed), API Activity (6003) for the rest; ' +
        'each record\'s id, seq, leaf hash, audit path, the tree size the path is against, its metadata and its sealed form stay under `unmapped`. ' +
        'There is no checkpoint line, since a SIEM takes every line as an event: the checkpoint (the NDJSON\'s last line, without its `type`) ' +
        'is the last event\'s `unmapped.checkpoint`, so the file still proves itself (an export that matches nothing is empty). ' +
        'The right is checked again before each block is read: ' +
        'if the session is revoked or its user is no longer an ADMIN, the response is cut off (NDJSON: without its checkpoint line; OCSF: without its last event).' + SCAN_LIMIT +
        ' An export holds its slot until its last line is sent, or its client goes. HEAD answers the headers only: it exports nothing, ' +
        'writes no record and takes no slot.',
      querystring: ExportQuery,
      response: {
        200: {
          description: 'The export, streamed',
          content: {
            'application/x-ndjson': {
              schema: { type: 'string' },
              examples: { ndjson: { summary: 'format=ndjson', value: EXPORT_EXAMPLE.ndjson }, ocsf: { summary: 'format=ocsf', value: EXPORT_EXAMPLE.ocsf } },
            },
            'text/csv': { schema: { type: 'string' }, example: EXPORT_EXAMPLE.csv },
          },
        },
        ...errorResponses(400, 401, 403, 429),
      },
    },
    handler: async (request, reply) => {
      const { format = 'ndjson', ...filters } = request.query;
      // HEAD: the headers GET would send, its refusals too (a bad q is 400), and nothing else:
      // no export, no EXPORT_AUDIT_LOG record, no scan slot (Fastify's HEAD would run the export and drop it).
      if (request.method === 'HEAD') {
        checkedSearch(filters.q);
        return reply.type(exportType(format)).header('content-disposition', exportDisposition(format)).send(undefined as never);
      }
      const release = scans.take('export');
      // The response closes when the stream ended, failed, or the client went (which stops the
      // stream): the scan is over in every case.
      reply.raw.once('close', release);
      try {
        await scans.holding('export');
        await audit.recordExport(authedContext(request), format, filters);
      } catch (err) {
        release();
        throw err;
      }
      reply.type(exportType(format));
      reply.header('content-disposition', exportDisposition(format));
      // A stream is piped as it is read (backpressure), past the serializer.
      return reply.send(evidence.exportStream(filters, format, authedContext(request).actor, { lowPriority: true }) as never);
    },
  });
}
