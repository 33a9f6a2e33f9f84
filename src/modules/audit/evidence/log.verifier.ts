// Verifies the audit log against its own evidence (docs/audit-integrity.md §5–6): recomputes
// every sealed record's leaf, rebuilds the tree in O(log n) memory, holds every stored tile to
// the tile the records make, and checks every signed checkpoint on the way. Reads in chunks
// outside any transaction, so that on PGlite (one connection) the service answers between them.
// The first problem found ends the run and names the first bad record, or the first bad tile.
// Sealing that has stopped is not a problem found but a check that cannot be made: the records
// waiting for their seal have nothing to be checked against yet (`not_checked`), whatever else
// was found. "Cannot check" must never read as "tampered": verificationAnswer says so in the
// answer of GET /audit-logs/verify.
import type { Queryable } from '../../../db/database.js';
import { checkCheckpoint } from '../../../tlog/checkpoint-check.js';
import { lastSealBatch, latestCheckpoint, recordFromTheFuture, sealedCanonicalFrom, signingKeys, type SealBatchRow, type SealedCanonicalRow } from './evidence.repository.js';
import { asHash, type Hash } from '../../../tlog/merkle.js';
import { DEFAULT_SEAL_STALL_MS, sealingStatus } from './sealing-status.service.js';
import { RightEdge } from '../../../tlog/tiles.js';
import { personalRefOf, PERSONAL_MARKER } from '../audit.writer.js';
import { personalDataMatches } from '../audit.personal-data.js';
import { storedPersonalData, type PersonalDataRow } from '../personal-data.repository.js';
import { canonicalLeaf } from './record.sealed-form.js';
import { parseVerifierKey, type NoteVerifier } from '../../../tlog/signed-note.js';
import { CheckpointChain } from './checkpoint-chain.verifier.js';
import { IdSet, takenNeverSealed } from './seal-coverage.verifier.js';
import { StoredTiles } from './tile.verifier.js';

/**
 * What verification could not check, and why: not a failure, nothing in it was found wrong
 * (GET /audit-logs/verify's `not_checked`, the CLI's "not checked" lines).
 */
export interface NotChecked {
  /** Why, as a code a program can act on; more may come. */
  reason: 'sealing_stopped';
  /** What was not checked, in words: "record 1234 and those after it". */
  what: string;
  /** Why, in words: "committed but not sealed (sealing has stopped: …)". */
  why: string;
  /** sealing_stopped: the first committed record still waiting for its seal. */
  first_unsealed_id: number;
}

/**
 * The engine's report, which `teamlog audit verify` and the API's scan worker both read. Its
 * `ok`, `first_unsealed_id` and `problem` keep their first meaning, on which the CLI relies:
 * sealing that has stopped, when nothing else was found, reads ok: false with first_unsealed_id
 * and the stall's words in problem. `not_checked` says it apart (also besides a real problem),
 * and verificationAnswer gives the answer that keeps integrity and "not checked" apart.
 */
export interface VerifyReport {
  /** Nothing checked was found wrong and nothing was left unchecked (see verificationAnswer for integrity alone). */
  ok: boolean;
  records_checked: number;
  checkpoints_checked: number;
  /** The tree as rebuilt from the records: its last seq and root (null when nothing is sealed). */
  head: { seq: number; tree_size: number; root_hash: string } | null;
  /**
   * Personal values checked against the refs their records commit to (values erased by
   * `teamlog audit redact` have nothing to check); null when no key was given to check them with.
   */
  personal_values_checked: number | null;
  first_bad_id?: number;
  /** A stored tile that is not the tile the records make (tlog-tiles path), when that is what was found. */
  first_bad_tile?: string;
  /**
   * When sealing has stopped and nothing else was found wrong (ok: false): the first committed
   * record still waiting for its seal, and `problem` says the stall. Beside a real problem it is
   * left out (that problem is the report's); not_checked names the record either way.
   */
  first_unsealed_id?: number;
  problem?: string;
  /** What could not be checked, and why (sealing that has stopped); absent when everything was. */
  not_checked?: NotChecked[];
}

/**
 * The answer of GET /audit-logs/verify (evidence.schemas.ts VerifyReport): `ok` is about
 * integrity alone, true when nothing checked was found wrong; what was not checked is in
 * `not_checked` (and `first_unsealed_id`), never in `problem`, which names real problems only.
 */
export type VerificationAnswer = Omit<VerifyReport, 'ok' | 'problem' | 'first_unsealed_id' | 'not_checked'> & {
  ok: boolean;
  /** Sealing has stopped: the first committed record waiting for its seal (it and those after it were not checked). */
  first_unsealed_id?: number;
  /** What was found wrong (ok: false only). */
  problem?: string;
  not_checked?: NotChecked[];
};

/**
 * The engine's report as GET /audit-logs/verify answers it: sealing that has stopped, with
 * nothing else found, is ok (everything checked verified) with the records waiting named as not
 * checked; a real problem is ok: false with its problem, and the stall, if any, beside it.
 */
export function verificationAnswer(report: VerifyReport): VerificationAnswer {
  const { ok, first_unsealed_id, problem, not_checked, ...checked } = report;
  // The report's first meaning (VerifyReport): ok: false with first_unsealed_id is the stall alone.
  const stallAlone = !ok && first_unsealed_id !== undefined;
  const stall = not_checked?.find((n) => n.reason === 'sealing_stopped');
  const unsealed = stall?.first_unsealed_id ?? first_unsealed_id;
  return {
    ...checked,
    ok: ok || stallAlone,
    ...(unsealed !== undefined ? { first_unsealed_id: unsealed } : {}),
    ...(!stallAlone && problem !== undefined ? { problem } : {}),
    ...(not_checked && not_checked.length > 0 ? { not_checked } : {}),
  };
}

export interface VerifyOptions {
  /** The keys the newest checkpoint must verify under: this service's own, or the operator's. */
  anchors: NoteVerifier[];
  origin: string;
  /** A checkpoint note held outside the database: the log must extend it (a truncated tail fails). */
  external?: string;
  /**
   * The keys personal-data refs may have been written with (secrets.ts): each personal value a
   * sealed record names must match its ref under one of them. None: not checked.
   */
  personalDataKeys?: Buffer[];
  /** How the seal is read (tests read in tiny chunks); DEFAULT_READS otherwise. */
  reads?: ReadPlan;
  /** Records waiting this long for their seal, with none made meanwhile, mean sealing has stopped: they are not checked (sealing-status.service.ts). */
  sealStallMs?: number;
  onProgress?: (checked: number, total: number) => void;
  /** Awaited between two chunks of the seal: the API's scans give way to the other users there (scan.worker.ts). */
  betweenChunks?: () => Promise<void>;
}

export interface ReadPlan {
  /** Sealed records per read. */
  chunk: number;
  /** Reads under way ahead of the one being checked. */
  ahead: number;
  /** Record ids per look for one taken and never sealed (a multiple of 8); ID_RANGE when unsaid. */
  idRange?: number;
  /** Stored full tiles per read; TILE_PAGE when unsaid. */
  tilePage?: number;
}

/**
 * Small reads, one ahead: larger reads were promoted out of V8's young generation whole, reads
 * further ahead (each on a connection of its own) cost more than they overlapped, and on PGlite
 * (one connection, one thread) a request waits for the read under way. The figures are in
 * docs/performance.md, "What the profiles showed".
 */
const DEFAULT_READS: ReadPlan = { chunk: 2000, ahead: 1 };

/** Ids per look for a taken record without a seal: a 12.5 KB bitmap, a short statement (PGlite answers between them). */
const ID_RANGE = 100_000;
const TILE_PAGE = 64;

/** What a step found wrong: the report's problem, and the record or tile it names. */
type Finding = Pick<VerifyReport, 'first_bad_id' | 'first_bad_tile'> & { problem: string };

/** Sealing that has stopped: the first record waiting, and the stall in words. */
interface Stall {
  first_unsealed_id: number;
  problem: string;
}

export async function verifyDatabase(db: Queryable, opts: VerifyOptions): Promise<VerifyReport> {
  const start = await logAsItBegan(db);
  const saved = opts.external === undefined ? undefined : savedCheckpoint(opts.external, opts.anchors);
  const rebuild = new TreeRebuild(db, opts, start, saved?.head);
  const found =
    saved?.invalid ??
    (await rebuild.checkSealedRecords()) ??
    (await rebuild.checkSealEnd()) ??
    (await rebuild.tiles.checkEdge(rebuild.tree)) ??
    (await positionFromTheFuture(db)) ??
    (await takenNeverSealed(db, start.lastBatch, rebuild.sealed, opts.reads?.idRange ?? ID_RANGE));
  // Looked at whatever was found: what it leaves unchecked is said beside a real problem too.
  const stall = await sealingStopped(db, opts.sealStallMs ?? DEFAULT_SEAL_STALL_MS);
  return rebuild.report(found, stall);
}

/** The log as it stood when a run began (logAsItBegan). */
interface LogStart {
  /** The newest checkpoint then (0: none). */
  lastCheckpointId: number;
  /** The sealer's last batch then: the records it had taken. */
  lastBatch: SealBatchRow | undefined;
  /** Records sealed then. */
  total: number;
  /** The registered signing keys, by key id. */
  keys: ReadonlyMap<string, NoteVerifier>;
}

/**
 * The log as it stood when this run began: the checkpoints that existed then (read first) and
 * the seal as far as they reach (read after them, so it covers every one of them). What the
 * sealer adds while the run goes on is left for the next run, not taken for a truncation.
 */
async function logAsItBegan(db: Queryable): Promise<LogStart> {
  const lastCheckpointId = (await latestCheckpoint(db))?.id ?? 0;
  const lastBatch = await lastSealBatch(db);
  const keys = new Map((await signingKeys(db)).map((k) => [k.key_id, parseVerifierKey(k.note_verifier_key)]));
  return { lastCheckpointId, lastBatch, total: lastBatch?.next_seq ?? 0, keys };
}

/** The size and root of a checkpoint held outside the database, which the log must extend. */
interface SavedHead {
  treeSize: number;
  rootHash: Hash;
}

/** The saved checkpoint's size and root, or why it is not one to hold the log to. */
function savedCheckpoint(note: string, anchors: NoteVerifier[]): { head?: SavedHead; invalid?: Finding } {
  const verdict = checkCheckpoint(note, anchors);
  if (!verdict.ok) return { invalid: { problem: `the saved checkpoint: ${verdict.problem}` } };
  return { head: { treeSize: verdict.checkpoint.treeSize, rootHash: verdict.checkpoint.rootHash } };
}

/**
 * The tree rebuilt from the sealed records in seq order, and what it is held to on the way: each
 * record's place in the seal and its recomputed leaf, the full tiles it completes, the checkpoints
 * whose size it reaches and the saved checkpoint; then where the seal ends. A record's checks are
 * synchronous: over millions of records, the run awaits only where a tile is completed or a
 * checkpoint reached.
 */
class TreeRebuild {
  readonly tree = new RightEdge();
  readonly tiles: StoredTiles;
  /** Every sealed record id, to find one sealed twice, and, at the end, one taken but never sealed. */
  readonly sealed = new IdSet();
  private readonly checkpoints: CheckpointChain;
  private readonly personalKeys: Buffer[];
  private checked = 0;
  private personalChecked = 0;
  /** A sealed record whose row is gone; the report names the first surviving record after it. */
  private gone: number | undefined;

  constructor(
    private readonly db: Queryable,
    private readonly opts: VerifyOptions,
    private readonly start: LogStart,
    /** The saved checkpoint, until the tree reaches its size. */
    private saved: SavedHead | undefined,
  ) {
    this.tiles = new StoredTiles(db, opts.reads?.tilePage ?? TILE_PAGE);
    this.checkpoints = new CheckpointChain(db, start.lastCheckpointId, start.keys, opts.origin);
    this.personalKeys = opts.personalDataKeys ?? [];
  }

  /** Each sealed record, a chunk at a time. */
  async checkSealedRecords(): Promise<Finding | undefined> {
    const { total } = this.start;
    const reads = new SealReads(this.db, total, this.opts.reads ?? DEFAULT_READS);
    await this.checkpoints.start();
    for (let seq = 0; seq < total; ) {
      const rows = await reads.next();
      if (rows === undefined) break;
      const stored = this.personalKeys.length > 0 ? await personalValuesNamed(this.db, rows) : NONE_STORED;
      for (const row of rows) {
        const leaf = this.recordLeaf(row, seq, stored);
        if (!Buffer.isBuffer(leaf)) return leaf;
        const full = this.tree.append(leaf).full;
        if (full.length > 0) {
          const badTile = await this.tiles.check(full);
          if (badTile) return badTile;
        }
        seq++;
        // A record whose row is gone: built on from its seal alone (the next one that exists ends the run).
        if (row.head === null) continue;
        this.checked++;
        this.checkpoints.sealed(row.record_id);
        if (this.checkpoints.reached(this.tree.size)) {
          const badCheckpoint = await this.checkpoints.pass(this.tree);
          if (badCheckpoint) return badCheckpoint;
        }
        if (this.saved?.treeSize === this.tree.size) {
          if (!this.tree.root().equals(this.saved.rootHash)) return { problem: 'the log does not extend the saved checkpoint: records it covered were changed or replaced' };
          this.saved = undefined;
        }
      }
      this.opts.onProgress?.(seq, total);
      // Let the service answer between chunks (PGlite has one connection and one thread).
      await new Promise((r) => setImmediate(r));
      await this.opts.betweenChunks?.();
    }
    return undefined;
  }

  /**
   * The leaf a sealed record puts in the tree, recomputed from its row, or what is wrong with it:
   * a seq out of place, a second seal, a record gone before it, a sealed form that no longer
   * matches, a personal value that no longer matches its ref. A record whose row is gone gives the
   * leaf its seal holds.
   */
  private recordLeaf(row: SealedCanonicalRow, seq: number, stored: ReadonlyMap<string, PersonalDataRow>): Hash | Finding {
    const id = row.record_id;
    if (row.seq !== seq) return { problem: `the seal jumps from seq ${seq - 1} to ${row.seq}: seal rows were removed`, first_bad_id: id };
    if (!this.sealed.add(id)) return { problem: `record ${id} is sealed twice (again at seq ${row.seq})`, first_bad_id: id };
    if (row.head === null) {
      this.gone ??= id;
      return asHash(row.leaf_hash);
    }
    if (this.gone !== undefined) return { problem: `record ${this.gone}, sealed before record ${id}, no longer exists`, first_bad_id: id };
    const metadata = row.exact ? parseMetadata(row.metadata) : undefined;
    const leaf = metadata && leafOf(row.head, metadata.value, row.tail);
    if (!leaf) {
      return {
        problem: `record ${id}: its sealed form is not JSON that can be canonicalized (a number beyond a double, an id beyond 2^53 - 1, or a text that starts with U+FEFF, which only a write behind the service's back stores)`,
        first_bad_id: id,
      };
    }
    if (!leaf.equals(row.leaf_hash)) return { problem: `record ${id} no longer matches its seal (seq ${seq})`, first_bad_id: id };
    return this.personalValueProblem(id, metadata!.value, row.metadata, stored) ?? leaf;
  }

  /** The values a record's personal refs stand for, as the API shows them (erased ones are gone: nothing to check), each against its ref. */
  private personalValueProblem(id: number, fields: unknown, text: string, stored: ReadonlyMap<string, PersonalDataRow>): Finding | undefined {
    if (stored.size === 0 || typeof fields !== 'object' || fields === null || !text.includes(PERSONAL_MARKER)) return undefined;
    for (const [field, value] of Object.entries(fields)) {
      const ref = personalRefOf(value);
      const kept = ref === undefined ? undefined : stored.get(ref);
      if (!kept) continue;
      this.personalChecked++;
      if (!this.personalKeys.some((key) => personalDataMatches(key, kept))) {
        return {
          problem:
            `record ${id}: the personal value of metadata.${field} no longer matches the ref the record commits to ` +
            '(changed behind the service\'s back, or stored under a key this check was not given: AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS)',
          first_bad_id: id,
        };
      }
    }
    return undefined;
  }

  /** Where the seal ends: its last record still there, no checkpoint beyond it, the saved checkpoint reached, the newest checkpoint trusted. */
  async checkSealEnd(): Promise<Finding | undefined> {
    if (this.gone !== undefined) return { problem: `record ${this.gone}, the last sealed one, no longer exists`, first_bad_id: this.gone };
    const beyond = await this.checkpoints.beyond(this.tree.size);
    if (beyond) return beyond;
    if (this.saved) return { problem: `the log has ${this.tree.size} sealed records, fewer than the ${this.saved.treeSize} of the saved checkpoint: its tail was removed` };
    return this.checkpoints.unanchored(this.opts.anchors);
  }

  report(found: Finding | undefined, stall: Stall | undefined): VerifyReport {
    const size = this.tree.size;
    return {
      ok: found === undefined && stall === undefined,
      records_checked: this.checked,
      checkpoints_checked: this.checkpoints.checked,
      head: size > 0 ? { seq: size - 1, tree_size: size, root_hash: this.tree.root().toString('base64') } : null,
      personal_values_checked: this.personalKeys.length > 0 ? this.personalChecked : null,
      ...(found?.first_bad_id !== undefined ? { first_bad_id: found.first_bad_id } : {}),
      ...(found?.first_bad_tile !== undefined ? { first_bad_tile: found.first_bad_tile } : {}),
      ...(found ? { problem: found.problem } : {}),
      // The stall alone: as the report always said it (VerifyReport), which the CLI reads.
      ...(!found && stall ? { first_unsealed_id: stall.first_unsealed_id, problem: stall.problem } : {}),
      ...(stall ? { not_checked: [notCheckedOf(stall)] } : {}),
    };
  }
}

/**
 * The seal read in chunks, `ahead` reads under way beyond the one being checked. They start where
 * the seal, being dense, should continue: from + chunk. Where it is not dense the first jump ends
 * the run, so what a later read skipped or repeated never counts. (A read still under way when a
 * problem ends the run must not become an unhandled rejection.)
 */
class SealReads {
  private readonly reads: Array<Promise<SealedCanonicalRow[]>> = [];
  private nextFrom = 0;

  constructor(
    private readonly db: Queryable,
    private readonly total: number,
    private readonly plan: ReadPlan,
  ) {
    this.readAhead();
  }

  /** The next chunk's rows; undefined when none is left, or the seal ends early. */
  async next(): Promise<SealedCanonicalRow[] | undefined> {
    const read = this.reads.shift();
    if (read === undefined) return undefined;
    const rows = await read;
    if (rows.length === 0) return undefined;
    this.readAhead();
    return rows;
  }

  private readAhead(): void {
    while (this.reads.length <= this.plan.ahead && this.nextFrom < this.total) {
      const rows = sealedCanonicalFrom(this.db, this.nextFrom, this.plan.chunk);
      rows.catch(() => {});
      this.reads.push(rows);
      this.nextFrom += this.plan.chunk;
    }
  }
}

/**
 * A record whose transaction position (xact_id, where it stands in commit order) no transaction
 * has reached yet: moved forward behind the service's back, far enough that the sealer will not
 * meet it again soon (moved a little, it is sealed twice when its id commits, and named for that).
 */
async function positionFromTheFuture(db: Queryable): Promise<Finding | undefined> {
  const moved = await recordFromTheFuture(db);
  if (!moved) return undefined;
  return {
    problem: `record ${moved.id} stands at transaction ${moved.xact_id} in commit order, but no transaction past ${BigInt(moved.next_xact_id) - 1n} has begun: its position was moved forward`,
    first_bad_id: moved.id,
  };
}

/** Sealing that has stopped: a committed record waiting for its seal past the stall time, with none sealed meanwhile (sealing-status.service.ts). */
async function sealingStopped(db: Queryable, stallMs: number): Promise<Stall | undefined> {
  const sealing = await sealingStatus(db, stallMs);
  if (!sealing.stalled) return undefined;
  const waited = Math.round(sealing.waiting!.ms / 1000);
  const since = sealing.sinceSealMs === undefined ? 'nothing was ever sealed' : `nothing was sealed for ${Math.round(sealing.sinceSealMs / 1000)} s`;
  return { problem: `sealing has stopped: record ${sealing.waiting!.id} committed ${waited} s ago and is not sealed, and ${since} (the service's log says why)`, first_unsealed_id: sealing.waiting!.id };
}

/** The records a stall leaves waiting, as not checked: there is nothing to check them against yet. */
function notCheckedOf(stall: Stall): NotChecked {
  return {
    reason: 'sealing_stopped',
    what: `record ${stall.first_unsealed_id} and those after it`,
    why: `committed but not sealed (${stall.problem})`,
    first_unsealed_id: stall.first_unsealed_id,
  };
}

/** The metadata's text parsed; undefined when it is not JSON (nothing the service writes). */
function parseMetadata(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

/**
 * The leaf of a sealed form as SQL wrote it; undefined when it cannot be canonicalized: a
 * number beyond a double in the metadata, which jsonb takes from someone behind the service's back.
 */
function leafOf(head: string, metadata: unknown, tail: string): Hash | undefined {
  try {
    return canonicalLeaf(head, metadata, tail);
  } catch {
    return undefined;
  }
}

const NONE_STORED: ReadonlyMap<string, PersonalDataRow> = new Map();

/**
 * The stored personal values that the records of a chunk name, by ref: one read for the chunk,
 * and none for a chunk whose records name none (most records: only the text is searched).
 */
async function personalValuesNamed(db: Queryable, rows: SealedCanonicalRow[]): Promise<ReadonlyMap<string, PersonalDataRow>> {
  const refs: string[] = [];
  for (const row of rows) {
    if (row.metadata === null || !row.metadata.includes(PERSONAL_MARKER)) continue;
    const metadata = parseMetadata(row.metadata)?.value;
    if (typeof metadata !== 'object' || metadata === null) continue;
    for (const value of Object.values(metadata)) {
      const ref = personalRefOf(value);
      if (ref !== undefined) refs.push(ref);
    }
  }
  if (refs.length === 0) return NONE_STORED;
  return new Map((await storedPersonalData(db, refs)).map((r) => [r.ref, r]));
}

