// The audit log's evidence as the API and the CLI serve it: the newest checkpoint, the public
// keys, inclusion and consistency proofs, the tree as C2SP tlog-tiles, verification and the export.
//
// Proofs are computed from the stored tiles, which are evidence, not trusted state: before one
// is served, the root it leads to is tied to the newest checkpoint (verified under this service's
// keys) by a consistency proof from the same tiles, and the proof itself is checked against that
// root. A stored tree changed behind the service's back yields a 409, never a proof that fails
// an outsider's check.
import { Readable } from 'node:stream';
import type { Database } from '../../../db/database.js';
import type { Actor } from '../../../context.js';
import { liveActor } from '../../../domain/session-verdict.js';
import { lookupSession } from '../../sessions/sessions.repository.js';
import { requireAuditor } from '../audit.policy.js';
import { findAuditRecord, type AuditFilters } from '../audit.repository.js';
import { conflict, invalid, notFound } from '../../../domain/errors.js';
import { checkCheckpoint } from '../../../tlog/checkpoint-check.js';
import { presentCheckpoint } from './evidence.presenter.js';
import { latestCheckpoint, sealedRowsFrom, sealedSize, sealOf, signingKeys, type CheckpointRow } from './evidence.repository.js';
import { exportAuditLog, type ExportFormat } from './export.stream.js';
import { establishIdentity, type LogIdentity } from './log.identity.js';
import { createScanPool, type ScanPool } from './scan.pool.js';
import {
  consistencyProof, consistencyProofNodes, inclusionProof, inclusionProofNodes, rootHash, rootNodes, verifyConsistency, verifyInclusion, type Hash, type NodeKey,
} from '../../../tlog/merkle.js';
import { sealedEntry, sealedForm, sealingLeaf } from './record.sealed-form.js';
import { noteVerifier } from '../../../tlog/signed-note.js';
import type { SigningKey } from './signing-key.loader.js';
import { readTile, storedNodes } from './tile.store.js';
import { encodeEntryBundle, TILE_WIDTH, tileWidthAt } from '../../../tlog/tiles.js';
import { verificationAnswer, verifyDatabase, type VerificationAnswer } from './log.verifier.js';
import type { WitnessPolicyFile } from '../../../config.js';
import { formatTlogProof } from '../../../tlog/proof-bundle.js';
import { newestCheckpointAtSize } from './cosignature.repository.js';
import { createWitnessing, type CosignedCheckpoint } from './witnessing.service.js';

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
  /** How long committed records may wait unsealed, with no seal made meanwhile, before sealing counts as stopped. */
  sealStallMs?: number;
  /**
   * Verifications and exports run in worker threads at a low CPU priority, at most this many
   * kept (scan.pool.ts): the API's (MAX_CONCURRENT_AUDIT_SCANS). None: on the calling thread (the CLI).
   */
  scanThreads?: number;
  /** Told of a worker thread's database connection failing (the scan itself fails with its error). */
  onScanWarning?: (err: Error) => void;
  /** The witnesses and their quorum (AUDIT_WITNESS_POLICY): what the served notes carry, and which checkpoint tlog clients are served. */
  witnessPolicy?: WitnessPolicyFile;
}

/**
 * Where a verification or an export runs. `lowPriority` (the API's): in a worker thread at the
 * lowest CPU priority, so that the requests of other users do not wait for it (scan.pool.ts);
 * else on the calling thread (the CLI, which serves nobody else).
 */
export interface ScanOptions {
  lowPriority?: boolean;
}

/** The stored tree disagrees with its signed checkpoint: what is served from it would not verify. */
const damaged = (what: string) =>
  conflict('CONFLICT', `${what} does not agree with the signed checkpoint: the stored audit evidence was changed. Run \`teamlog audit verify\`.`);

export function createEvidenceService(db: Database, key: SigningKey, options: EvidenceOptions = {}) {
  const { origin: configuredOrigin, previousVerifierKeys = [], personalDataKeys = [], sealStallMs } = options;
  let identity: Promise<LogIdentity> | undefined;
  /** The scans' worker threads, made at the first scan asked to run in one (the CLI never does). */
  let pool: ScanPool | undefined;
  const scanPool = (lowPriority: boolean | undefined): ScanPool | undefined => {
    if (!lowPriority || !options.scanThreads) return undefined;
    return (pool ??= createScanPool(db, { size: options.scanThreads, ...(options.onScanWarning ? { onWarning: options.onScanWarning } : {}) }));
  };
  const witnessing = createWitnessing(db, options.witnessPolicy);

  /** The origin and the registered key, settled once per process (and retried if that failed). */
  function logIdentity(): Promise<LogIdentity> {
    identity ??= establishIdentity(db, key, configuredOrigin, previousVerifierKeys).catch((err: unknown) => {
      identity = undefined;
      throw err;
    });
    return identity;
  }

  /** The newest checkpoint, which must verify under a key this service trusts. */
  async function trustedCheckpoint(): Promise<CheckpointRow | undefined> {
    const checkpoint = await latestCheckpoint(db);
    if (!checkpoint) return undefined;
    const id = await logIdentity();
    if (!checkCheckpoint(checkpoint.note, id.trusted, { treeSize: checkpoint.tree_size, rootHash: Buffer.from(checkpoint.root_hash) }).ok) throw damaged('The newest checkpoint');
    return checkpoint;
  }

  /**
   * The root of the stored tree at `size`, tied to the newest checkpoint: a consistency proof
   * between the two sizes, from the same tiles, must verify against the signed root. Answers the
   * root and a node source over every tile read (the caller's own nodes included).
   */
  async function anchoredRoot(size: number, extra: NodeKey[]): Promise<{ root: Hash; nodes: (k: NodeKey) => Hash }> {
    const checkpoint = await trustedCheckpoint();
    if (!checkpoint) throw notFound('Checkpoint');
    const signed = Buffer.from(checkpoint.root_hash);
    const [small, large] = size <= checkpoint.tree_size ? [size, checkpoint.tree_size] : [checkpoint.tree_size, size];
    let nodes: (k: NodeKey) => Hash;
    let root: Hash;
    let proof: Hash[];
    let otherRoot: Hash;
    try {
      nodes = await storedNodes(db, [...rootNodes(size), ...consistencyProofNodes(small, large), ...rootNodes(checkpoint.tree_size), ...extra]);
      root = rootHash(size, nodes);
      otherRoot = rootHash(checkpoint.tree_size, nodes);
      proof = consistencyProof(small, large, nodes);
    } catch {
      throw damaged('The stored tree (a tile is missing)');
    }
    const ok = size <= checkpoint.tree_size ? verifyConsistency(small, large, root, signed, proof) : verifyConsistency(small, large, signed, root, proof);
    if (!ok || !otherRoot.equals(signed)) throw damaged('The stored tree');
    return { root, nodes };
  }

  async function requireSealed(size: number, field: string): Promise<void> {
    const sealed = await sealedSize(db);
    if (size > sealed) throw invalid(`/${field}`, `must be at most the number of sealed records (${sealed})`);
  }

  const service = {
    logIdentity,
    witnessing,

    /** The newest checkpoint, its note carrying the witnesses' cosignatures, and whether they meet the policy's quorum. */
    async latestCheckpoint() {
      const c = await latestCheckpoint(db);
      if (!c) throw notFound('Checkpoint');
      return presentCheckpoint(c, await witnessing.cosigned(c));
    },

    async publicKeys() {
      return (await signingKeys(db)).map((k) => ({ key_id: k.key_id, algorithm: k.algorithm, public_key: k.public_key, note_verifier_key: k.note_verifier_key, created_at: k.created_at }));
    },

    /**
     * RFC 6962 inclusion proof of a record in the tree of `treeSize` leaves (default: the newest
     * checkpoint's), with the record's sealed form, from which a client recomputes the leaf.
     */
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
      const record = await findAuditRecord(db, recordId);
      if (!record) throw damaged(`Sealed record ${recordId} (it no longer exists)`);
      const sealed = sealedForm(record);
      const leaf = sealingLeaf(sealed).leaf;
      if (!leaf.equals(seal.leaf_hash)) throw damaged(`Record ${recordId} (it no longer matches its seal)`);
      const keys = inclusionProofNodes(seal.seq, size);
      const { root, nodes } = await anchoredRoot(size, keys);
      const proof = inclusionProof(seal.seq, size, nodes);
      if (!verifyInclusion(leaf, seal.seq, size, proof, root)) throw damaged(`The stored tree around record ${recordId}`);
      return { id: recordId, seq: seal.seq, tree_size: size, leaf_hash: b64(seal.leaf_hash), audit_path: proof.map(b64), sealed };
    },

    async consistencyProof(from: number, to: number) {
      if (from > to) throw invalid('/from', 'must not be greater than to');
      await requireSealed(to, 'to');
      const keys = [...consistencyProofNodes(from, to), ...rootNodes(from)];
      const { root, nodes } = await anchoredRoot(to, keys);
      const proof = consistencyProof(from, to, nodes);
      if (!verifyConsistency(from, to, rootHash(from, nodes), root, proof)) throw damaged('The stored tree');
      return { from, to, proof: proof.map(b64) };
    },

    /**
     * The signed note of the newest checkpoint (C2SP tlog-tiles' `checkpoint`), or with a witness
     * policy the newest witnessed one, carrying the cosignatures.
     */
    async checkpointNote(): Promise<string> {
      return (await witnessing.served()).note;
    },

    /**
     * The record's proof as a C2SP tlog-proof (c2sp.org/tlog-proof@v1): its entry (the JCS bytes of
     * its sealed form) as `extra`, its seq as `index`, the inclusion path, and the cosigned note of
     * the checkpoint of `treeSize` records, or by default the one tlog clients are served (the
     * newest witnessed with a policy, else the newest). The path is checked against that
     * checkpoint's root before it is served.
     */
    async tlogProof(recordId: number, treeSize?: number): Promise<string> {
      let checkpoint: CosignedCheckpoint;
      if (treeSize === undefined) {
        checkpoint = await witnessing.served();
      } else {
        const row = await newestCheckpointAtSize(db, treeSize);
        if (!row) throw notFound(`Checkpoint of tree size ${treeSize}`);
        checkpoint = await witnessing.cosigned(row);
      }
      const size = checkpoint.row.tree_size;
      const seal = await sealOf(db, recordId);
      if (!seal) throw notFound('Sealed audit record');
      if (seal.seq >= size) throw notFound(witnessing.policy && treeSize === undefined ? 'Witnessed checkpoint covering this record' : 'Checkpointed audit record');
      const proof = await service.inclusionProof(recordId, size);
      const path = proof.audit_path.map((h) => Buffer.from(h, 'base64'));
      if (!verifyInclusion(Buffer.from(proof.leaf_hash, 'base64'), proof.seq, size, path, Buffer.from(checkpoint.row.root_hash))) throw damaged(`The stored tree around record ${recordId}`);
      return formatTlogProof({ extra: sealedEntry(proof.sealed).entry, index: proof.seq, inclusionPath: path, checkpoint: checkpoint.note });
    },

    /**
     * A hash tile as stored: the first `width` hashes of tile (level, index), for any width the
     * sealed tree holds (a full tile only once the tree has filled it); 404 beyond. Clients check
     * tiles against a checkpoint themselves, as tlog-tiles intends.
     */
    async tile(level: number, index: number, width: number): Promise<{ bytes: Buffer; full: boolean }> {
      const held = tileWidthAt(await sealedSize(db), level, index);
      if (width > held) throw notFound('Tile');
      const bytes = await readTile(db, level, index, width);
      if (!bytes) throw damaged(`Tile ${level}/${index}`);
      return { bytes, full: width === TILE_WIDTH };
    },

    /** The entry bundle of records seq index·256 … index·256 + width − 1: each record's sealed form, canonical (RFC 8785). */
    async entries(index: number, width: number): Promise<{ bytes: Buffer; full: boolean }> {
      const held = tileWidthAt(await sealedSize(db), 0, index);
      if (width > held) throw notFound('Entry bundle');
      const rows = await sealedRowsFrom(db, index * TILE_WIDTH, width);
      const entries = rows.map((row) => {
        if (!row.present) throw damaged(`Sealed record ${row.record_id} (it no longer exists)`);
        return sealedEntry(row).entry;
      });
      if (entries.length !== width) throw damaged('The seal');
      return { bytes: encodeEntryBundle(entries), full: width === TILE_WIDTH };
    },

    /**
     * The filtered log as a stream of NDJSON or CSV text, read from the database as it is
     * consumed. For a caller (an API request), whose right was checked when the request began,
     * it is checked again against the session as it stands before each block: an export can
     * stream for minutes to a slow reader, and a revoked session or a demoted ADMIN must stop it
     * at once (the stream then ends in an error, without its checkpoint line).
     */
    exportStream(filters: AuditFilters, format: ExportFormat, caller?: Actor, how: ScanOptions = {}): Readable {
      const stillEntitled = caller
        ? async () => requireAuditor(liveActor(await lookupSession(db, caller.sessionId), caller))
        : undefined;
      const job = { filters, format, chunk: 1000, block: 1024, ahead: EXPORT_BLOCKS_AHEAD, ...(options.witnessPolicy ? { witnessPolicy: options.witnessPolicy.text } : {}) };
      const scans = scanPool(how.lowPriority);
      if (scans) return scans.exportStream(job, stillEntitled);
      return Readable.from(exportAuditLog(db, { ...job, stillEntitled }), { objectMode: false });
    },

    /**
     * Verifies the whole log; the newest checkpoint must be under this service's own key. Answers
     * as GET /audit-logs/verify does (verificationAnswer): `ok` for integrity alone, and records
     * that sealing that stopped left waiting as not checked, never as a failure.
     */
    async verify(options: { external?: string; onProgress?: (checked: number, total: number) => void } & ScanOptions = {}): Promise<VerificationAnswer> {
      const id = await logIdentity();
      const stall = sealStallMs !== undefined ? { sealStallMs } : {};
      const scans = scanPool(options.lowPriority);
      if (scans) {
        // The same anchor, as its verifier key: the worker is handed no private key.
        const job = { origin: id.origin, anchors: [id.verifierKey], personalDataKeys, ...stall, ...(options.external !== undefined ? { external: options.external } : {}) };
        return verificationAnswer(await scans.verify(job, options.onProgress));
      }
      const { lowPriority: _, ...rest } = options;
      return verificationAnswer(await verifyDatabase(db, { anchors: [noteVerifier(id.origin, key.privateKey)], origin: id.origin, personalDataKeys, ...stall, ...rest }));
    },

    /** Ends the scans' worker threads (the app is closing): a scan still running fails. */
    closeScans: async () => pool?.close(),
  };
  return service;
}

export type EvidenceService = ReturnType<typeof createEvidenceService>;
