// The audit log's evidence as the API and the CLI serve it: the newest checkpoint, the public
// keys, inclusion and consistency proofs from the stored tree, and verification.
import { Readable } from 'node:stream';
import type { Database } from '../../../db/database.js';
import type { Actor } from '../../../context.js';
import { liveActor } from '../../sessions/session-verdict.js';
import { lookupSession } from '../../sessions/sessions.repository.js';
import { requireAuditor } from '../audit-access.js';
import type { AuditFilters } from '../audit.repository.js';
import { invalid, notFound } from '../../../domain/errors.js';
import { presentCheckpoint } from './evidence.presenter.js';
import { fetchNodes, latestCheckpoint, sealedSize, sealOf, signingKeys } from './evidence.repository.js';
import { exportAuditLog, type ExportFormat } from './export.js';
import { establishIdentity, type LogIdentity } from './log-identity.js';
import { consistencyProof, consistencyProofNodes, inclusionProof, inclusionProofNodes } from './merkle.js';
import { nodeSource } from './sealer.js';
import { noteVerifier } from './signed-note.js';
import type { SigningKey } from './signing-key.js';
import { verifyDatabase, type VerifyReport } from './verifier.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/**
 * Blocks an export reads ahead of the one it sends. With one, a trace of a 1.3-million-record
 * export showed the database and this process taking turns (each block read, then written,
 * then the next read started); with two the database reads the next block while one is
 * written: 104,000 against 100,000 records/s on average over seven alternated runs each, on a
 * VM whose speed drifts by a quarter between runs.
 */
const EXPORT_BLOCKS_AHEAD = 2;

export interface EvidenceOptions {
  /** The log's origin as configured (AUDIT_LOG_ORIGIN); undefined: generated once and kept in the database. */
  origin?: string;
  /** Note verifier keys of keys that signed before a rotation (AUDIT_PREVIOUS_VERIFIER_KEYS). */
  previousVerifierKeys?: string[];
  /** The keys personal-data refs may have been written with (secrets.ts), for verification. */
  personalDataKeys?: Buffer[];
}

export function createEvidenceService(db: Database, key: SigningKey, options: EvidenceOptions = {}) {
  const { origin: configuredOrigin, previousVerifierKeys = [], personalDataKeys = [] } = options;
  let identity: Promise<LogIdentity> | undefined;

  /** The origin and the registered key, settled once per process (and retried if that failed). */
  function logIdentity(): Promise<LogIdentity> {
    identity ??= establishIdentity(db, key, configuredOrigin, previousVerifierKeys).catch((err: unknown) => {
      identity = undefined;
      throw err;
    });
    return identity;
  }

  return {
    logIdentity,

    async latestCheckpoint() {
      const c = await latestCheckpoint(db);
      if (!c) throw notFound('Checkpoint');
      return presentCheckpoint(c);
    },

    async publicKeys() {
      return (await signingKeys(db)).map((k) => ({ key_id: k.key_id, algorithm: k.algorithm, public_key: k.public_key, note_verifier_key: k.note_verifier_key, created_at: k.created_at }));
    },

    /** RFC 6962 inclusion proof of a record in the tree of `treeSize` leaves (default: the newest checkpoint's). */
    async inclusionProof(recordId: number, treeSize?: number) {
      const seal = await sealOf(db, recordId);
      // Unsealed and nonexistent records look alike: a proof exists only once a record is sealed.
      if (!seal) throw notFound('Sealed audit record');
      const size = treeSize ?? (await latestCheckpoint(db))?.tree_size;
      if (size === undefined || seal.seq >= size) {
        if (treeSize === undefined) throw notFound('Checkpointed audit record');
        throw invalid('/tree_size', `must be greater than the record's seq (${seal.seq})`);
      }
      await requireSealed(size, 'tree_size');
      const proof = inclusionProof(seal.seq, size, nodeSource(await fetchNodes(db, inclusionProofNodes(seal.seq, size))));
      return { id: recordId, seq: seal.seq, tree_size: size, leaf_hash: b64(seal.leaf_hash), audit_path: proof.map(b64) };
    },

    async consistencyProof(from: number, to: number) {
      if (from > to) throw invalid('/from', 'must not be greater than to');
      await requireSealed(to, 'to');
      const proof = consistencyProof(from, to, nodeSource(await fetchNodes(db, consistencyProofNodes(from, to))));
      return { from, to, proof: proof.map(b64) };
    },

    /**
     * The filtered log as a stream of NDJSON or CSV text, read from the database as it is
     * consumed. For a caller (an API request), whose right was checked when the request began,
     * it is checked again against the session as it stands before each block: an export can
     * stream for minutes to a slow reader, and a revoked session or a demoted ADMIN must stop it
     * at once (the stream then ends in an error, without its checkpoint line).
     */
    exportStream(filters: AuditFilters, format: ExportFormat, caller?: Actor): Readable {
      const stillEntitled = caller
        ? async () => requireAuditor(liveActor(await lookupSession(db, caller.sessionId), caller))
        : undefined;
      return Readable.from(exportAuditLog(db, { filters, format, chunk: 1000, block: 1024, ahead: EXPORT_BLOCKS_AHEAD, stillEntitled }), { objectMode: false });
    },

    /** Verifies the whole log; the newest checkpoint must be under this service's own key. */
    async verify(options: { external?: string; onProgress?: (checked: number, total: number) => void } = {}): Promise<VerifyReport> {
      const id = await logIdentity();
      return verifyDatabase(db, {
        anchors: [noteVerifier(id.origin, key.privateKey)],
        origin: id.origin,
        personalDataKeys,
        ...options,
      });
    },
  };

  async function requireSealed(size: number, field: string): Promise<void> {
    const sealed = await sealedSize(db);
    if (size > sealed) throw invalid(`/${field}`, `must be at most the number of sealed records (${sealed})`);
  }
}

export type EvidenceService = ReturnType<typeof createEvidenceService>;
