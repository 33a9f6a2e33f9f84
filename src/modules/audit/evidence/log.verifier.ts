// Verifies the audit log against its own evidence (docs/audit-integrity.md §5–6): recomputes
// every sealed record's leaf, rebuilds the tree in O(log n) memory, holds every stored tile to
// the tile the records make, and checks every signed checkpoint on the way. Reads in chunks
// outside any transaction, so that on PGlite (one connection) the service answers between them.
// The first problem found ends the run and names the first bad record, or the first bad tile.
import type { Queryable } from '../../../db/database.js';
import { checkCheckpoint } from '../../../tlog/checkpoint-check.js';
import { nextPair } from '../../../db/commit-order.js';
import {
  badPartialTile, checkpointsAfter, firstUnsealedTaken, fullTilesFrom, lastSealBatch, latestCheckpoint, maxRecordId, sealedCanonicalFrom, signingKeys, tileBeyond,
  type CheckpointRow, type Consumed, type SealBatchRow, type SealedCanonicalRow, type TileRow,
} from './evidence.repository.js';
import { asHash, type Hash } from '../../../tlog/merkle.js';
import { DEFAULT_SEAL_STALL_MS, sealingStatus } from './sealing-status.service.js';
import { RightEdge, rightEdgeWidths, tilePath } from '../../../tlog/tiles.js';
import { personalRefOf, PERSONAL_MARKER } from '../audit.writer.js';
import { personalDataMatches } from '../audit.personal-data.js';
import { storedPersonalData, type PersonalDataRow } from '../personal-data.repository.js';
import { canonicalLeaf } from './record.sealed-form.js';
import { parseVerifierKey, type NoteVerifier } from '../../../tlog/signed-note.js';

export interface VerifyReport {
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
  /** When sealing has stopped: the first committed record still waiting for its seal. */
  first_unsealed_id?: number;
  problem?: string;
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
  /** Records waiting this long for their seal, with none made meanwhile, fail verification (sealing-status.service.ts). */
  sealStallMs?: number;
  onProgress?: (checked: number, total: number) => void;
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
 * Small reads, one ahead. Measured on a million records on PostgreSQL: 20,000-record reads were
 * promoted out of the young generation whole (a third of the run was garbage collection), and
 * reads further ahead, each on a connection of its own, cost more than they overlapped. On
 * PGlite (one connection, one thread) a read of 2,000 keeps a request waiting ~20 ms at most.
 */
const DEFAULT_READS: ReadPlan = { chunk: 2000, ahead: 1 };

const CHECKPOINT_PAGE = 1000;
/** Ids per look for a taken record without a seal: a 12.5 KB bitmap, a short statement (PGlite answers between them). */
const ID_RANGE = 100_000;
const TILE_PAGE = 64;

export async function verifyDatabase(db: Queryable, opts: VerifyOptions): Promise<VerifyReport> {
  // The log as it stood when this run began: the checkpoints that existed then (read first) and
  // the seal as far as they reach (read after them, so it covers every one of them). What the
  // sealer adds while the run goes on is left for the next run, not taken for a truncation.
  const lastCheckpointId = (await latestCheckpoint(db))?.id ?? 0;
  const lastBatch = await lastSealBatch(db);
  const total = lastBatch?.next_seq ?? 0;
  const keys = new Map((await signingKeys(db)).map((k) => [k.key_id, parseVerifierKey(k.note_verifier_key)]));
  const checkpoints = checkpointStream(db, lastCheckpointId);
  const builder = new RightEdge();
  const tiles = new StoredTiles(db, opts.reads?.tilePage ?? TILE_PAGE);
  /** Every sealed record id, to find one sealed twice, and, at the end, one taken but never sealed. */
  const sealed = new IdSet();
  let checked = 0;
  let checkpointsChecked = 0;
  const personalKeys = opts.personalDataKeys ?? [];
  let personalChecked = 0;
  let previousNote: string | null = null;
  let newest: CheckpointRow | undefined;
  /** The first record sealed after the last checkpoint that matched: where a resealed change can start. */
  let firstSinceCheckpoint: number | undefined;
  /** A sealed record whose row is gone; the report names the first surviving record after it. */
  let gone: number | undefined;
  let external = opts.external === undefined ? undefined : externalClaim(opts.external, opts.anchors);
  if (external && 'problem' in external) return report(false, external.problem);

  function report(ok: boolean, problem?: string, firstBadId?: number, more: Pick<VerifyReport, 'first_bad_tile' | 'first_unsealed_id'> = {}): VerifyReport {
    const head = builder.size > 0 ? { seq: builder.size - 1, tree_size: builder.size, root_hash: builder.root().toString('base64') } : null;
    return {
      ok, records_checked: checked, checkpoints_checked: checkpointsChecked, head, personal_values_checked: personalKeys.length > 0 ? personalChecked : null,
      ...(firstBadId !== undefined ? { first_bad_id: firstBadId } : {}), ...more, ...(problem ? { problem } : {}),
    };
  }
  const badTile = (found: { path: string; problem: string }) => report(false, found.problem, undefined, { first_bad_tile: found.path });

  // Reads ahead start where the seal, being dense, should continue: from + chunk. Where it is
  // not dense the first jump ends the run, so what a later read skipped or repeated never counts.
  // (A read still under way when a problem ends the run must not become an unhandled rejection.)
  const { chunk, ahead } = opts.reads ?? DEFAULT_READS;
  const reads: Array<Promise<SealedCanonicalRow[]>> = [];
  let nextFrom = 0;
  const readAhead = () => {
    while (reads.length <= ahead && nextFrom < total) {
      const rows = sealedCanonicalFrom(db, nextFrom, chunk);
      rows.catch(() => {});
      reads.push(rows);
      nextFrom += chunk;
    }
  };
  readAhead();
  let upcoming = await checkpoints.peek();
  for (let seq = 0; seq < total && reads.length > 0; ) {
    const rows = await reads.shift()!;
    if (rows.length === 0) break;
    readAhead();
    const stored = personalKeys.length > 0 ? await personalValuesNamed(db, rows) : NONE_STORED;
    for (const row of rows) {
      if (row.seq !== seq) return report(false, `the seal jumps from seq ${seq - 1} to ${row.seq}: seal rows were removed`, row.record_id);
      if (!sealed.add(row.record_id)) return report(false, `record ${row.record_id} is sealed twice (again at seq ${row.seq})`, row.record_id);
      if (row.head === null) {
        gone ??= row.record_id;
        const tileProblem = await tiles.check(builder.append(asHash(row.leaf_hash)).full);
        if (tileProblem) return badTile(tileProblem);
        seq++;
        continue;
      }
      const id = row.record_id;
      if (gone !== undefined) return report(false, `record ${gone}, sealed before record ${id}, no longer exists`, id);
      const metadata = row.exact ? parseMetadata(row.metadata) : undefined;
      const leaf = metadata && leafOf(row.head, metadata.value, row.tail);
      if (!leaf) return report(false, `record ${id}: its sealed form is not JSON that can be canonicalized (a number beyond a double, an id beyond 2^53 - 1, or a text that starts with U+FEFF, which only a write behind the service's back stores)`, id);
      if (!leaf.equals(row.leaf_hash)) return report(false, `record ${id} no longer matches its seal (seq ${seq})`, id);
      // The values its personal refs stand for, as the API shows them (erased ones are gone: nothing to check).
      const fields = metadata!.value;
      if (stored.size > 0 && typeof fields === 'object' && fields !== null && row.metadata.includes(PERSONAL_MARKER)) {
        for (const [field, value] of Object.entries(fields)) {
          const ref = personalRefOf(value);
          const kept = ref === undefined ? undefined : stored.get(ref);
          if (!kept) continue;
          personalChecked++;
          if (!personalKeys.some((key) => personalDataMatches(key, kept))) {
            return report(
              false,
              `record ${id}: the personal value of metadata.${field} no longer matches the ref the record commits to ` +
                '(changed behind the service\'s back, or stored under a key this check was not given: AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS)',
              id,
            );
          }
        }
      }
      firstSinceCheckpoint ??= id;
      const full = builder.append(leaf).full;
      if (full.length > 0) {
        const tileProblem = await tiles.check(full);
        if (tileProblem) return badTile(tileProblem);
      }
      seq++;
      checked++;
      // The next checkpoint is awaited only once one is passed: not a promise per record.
      for (let cp = upcoming; cp && cp.tree_size <= builder.size; cp = upcoming) {
        if (cp.tree_size < builder.size) return report(false, `checkpoint ${cp.id} (tree size ${cp.tree_size}) is out of order`, firstSinceCheckpoint);
        const verifier = keys.get(cp.key_id);
        const verdict = verifier
          ? checkCheckpoint(cp.note, [verifier], {
              treeSize: cp.tree_size, rootHash: Buffer.from(cp.root_hash), signature: Buffer.from(cp.signature), previousNote, origin: opts.origin,
            })
          : { ok: false as const, problem: `it names key "${cp.key_id}", which is not registered` };
        if (!verdict.ok) return report(false, `checkpoint ${cp.id}: ${verdict.problem}`, firstSinceCheckpoint);
        if (!builder.root().equals(cp.root_hash)) {
          return report(false, `the records no longer hash to the root of checkpoint ${cp.id} (tree size ${cp.tree_size}): records sealed since the checkpoint before it were changed, and their seal recomputed`, firstSinceCheckpoint);
        }
        previousNote = cp.note;
        newest = cp;
        checkpointsChecked++;
        firstSinceCheckpoint = undefined;
        checkpoints.take();
        upcoming = await checkpoints.peek();
      }
      if (external && 'treeSize' in external && builder.size === external.treeSize) {
        if (!builder.root().equals(external.rootHash)) return report(false, 'the log does not extend the saved checkpoint: records it covered were changed or replaced');
        external = undefined;
      }
    }
    opts.onProgress?.(seq, total);
    // Let the service answer between chunks (PGlite has one connection and one thread).
    await new Promise((r) => setImmediate(r));
  }
  if (gone !== undefined) return report(false, `record ${gone}, the last sealed one, no longer exists`, gone);
  const beyond = await checkpoints.peek();
  if (beyond) return report(false, `checkpoint ${beyond.id} covers ${beyond.tree_size} records, but only ${builder.size} are sealed: the seal was truncated`);
  if (external && 'treeSize' in external) {
    return report(false, `the log has ${builder.size} sealed records, fewer than the ${external.treeSize} of the saved checkpoint: its tail was removed`);
  }
  if (newest) {
    const anchored = checkCheckpoint(newest.note, opts.anchors);
    if (!anchored.ok) return report(false, `the newest checkpoint (${newest.id}) is not signed by the trusted key: ${anchored.problem}`);
  } else if (builder.size > 0) {
    // Sealed records and no checkpoint yet: nothing signed to hold them to (a fresh log).
  }
  const edgeProblem = await tiles.checkEdge(builder);
  if (edgeProblem) return badTile(edgeProblem);
  const inserted = lastBatch ? await unsealedTaken(db, consumedBy(lastBatch), sealed, opts.reads?.idRange ?? ID_RANGE) : undefined;
  if (inserted !== undefined) return report(false, `record ${inserted} sits among sealed records in commit order but was never sealed: it was inserted behind the service's back`, inserted);
  const sealing = await sealingStatus(db, opts.sealStallMs ?? DEFAULT_SEAL_STALL_MS);
  if (sealing.stalled) {
    const waited = Math.round(sealing.waiting!.ms / 1000);
    const since = sealing.sinceSealMs === undefined ? 'nothing was ever sealed' : `nothing was sealed for ${Math.round(sealing.sinceSealMs / 1000)} s`;
    return report(false, `sealing has stopped: record ${sealing.waiting!.id} committed ${waited} s ago and is not sealed, and ${since} (the service's log says why)`, undefined, { first_unsealed_id: sealing.waiting!.id });
  }
  return report(true);
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

/** Checkpoints in id order up to id `upTo`, a page at a time. */
function checkpointStream(db: Queryable, upTo: number) {
  let page: CheckpointRow[] = [];
  let at = 0;
  let lastId = 0;
  let done = false;
  return {
    async peek(): Promise<CheckpointRow | undefined> {
      if (at >= page.length && !done) {
        const rows = await checkpointsAfter(db, lastId, CHECKPOINT_PAGE);
        page = rows.filter((c) => c.id <= upTo);
        at = 0;
        done = rows.length < CHECKPOINT_PAGE || page.length < rows.length;
        if (rows.length > 0) lastId = rows[rows.length - 1]!.id;
      }
      return page[at];
    },
    take() {
      at++;
    },
  };
}

function externalClaim(note: string, anchors: NoteVerifier[]) {
  const verdict = checkCheckpoint(note, anchors);
  if (!verdict.ok) return { problem: `the saved checkpoint: ${verdict.problem}` };
  return { treeSize: verdict.checkpoint.treeSize, rootHash: verdict.checkpoint.rootHash };
}

/** What the sealer's last batch says it has taken (db/commit-order.ts, nextPair). */
function consumedBy(last: SealBatchRow): Consumed {
  const pair = nextPair(last);
  const upper = last.snapshot !== null ? { snapshot: last.snapshot } : { xact: last.after_xact!, id: last.after_id! };
  return { upper, unfinished: pair.upper !== null ? { lower: pair.lower, afterId: pair.afterId } : null };
}

/**
 * The first record the sealer's position says it took that has no seal. PostgreSQL looks, given
 * the seal's ids a range at a time as a bitmap: reading every id into Node instead made an object
 * per record that outlived the young generation, 140 MB of old-generation garbage on 1.9 million
 * records, which the export after a verification then carried as its own RSS.
 */
async function unsealedTaken(db: Queryable, consumed: Consumed, sealed: IdSet, range: number): Promise<number | undefined> {
  const maxId = await maxRecordId(db);
  for (let from = 0; from <= maxId; from += range) {
    const found = await firstUnsealedTaken(db, from, sealed.bitmap(from, range), consumed);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** A set of record ids: a bitmap up to 2^32 (ids are dense there), a Set beyond (ids only tampering makes). */
class IdSet {
  private bits = new Uint8Array(1 << 16);
  private readonly far = new Set<number>();

  /** Adds the id; false when it was there already. */
  add(id: number): boolean {
    if (id >= 2 ** 32 || id < 0) {
      if (this.far.has(id)) return false;
      this.far.add(id);
      return true;
    }
    const byte = Math.floor(id / 8);
    if (byte >= this.bits.length) {
      const grown = new Uint8Array(Math.max(byte + 1, this.bits.length * 2));
      grown.set(this.bits);
      this.bits = grown;
    }
    const mask = 1 << (id % 8);
    if (this.bits[byte]! & mask) return false;
    this.bits[byte]! |= mask;
    return true;
  }

  has(id: number): boolean {
    if (id >= 2 ** 32 || id < 0) return this.far.has(id);
    const byte = Math.floor(id / 8);
    return byte < this.bits.length && (this.bits[byte]! & (1 << (id % 8))) !== 0;
  }

  /** The set's ids in [from, from + count) as a bitmap (bit i, least significant first, is id from + i); both multiples of 8. */
  bitmap(from: number, count: number): Uint8Array {
    const out = new Uint8Array(count / 8);
    if (from + count <= 2 ** 32) {
      out.set(this.bits.subarray(Math.min(from / 8, this.bits.length), Math.min((from + count) / 8, this.bits.length)));
    } else {
      for (let id = from; id < from + count; id++) if (this.has(id)) out[(id - from) >> 3]! |= 1 << ((id - from) & 7);
    }
    return out;
  }
}

/**
 * The stored tiles, held to the ones the records make as the rebuild completes them: each full
 * tile against the stored one of its place (read a page at a time, per level), each stored
 * partial tile of that place against its prefix, and at the end the tree's edge.
 */
class StoredTiles {
  private readonly pages = new Map<number, { rows: TileRow[]; at: number; next: number; done: boolean }>();

  constructor(
    private readonly db: Queryable,
    private readonly pageSize: number,
  ) {}

  async check(full: Array<{ level: number; index: number; hashes: Buffer }>): Promise<{ path: string; problem: string } | undefined> {
    for (const tile of full) {
      const stored = await this.nextFull(tile.level);
      const path = tilePath(tile.level, tile.index);
      if (!stored || stored.idx !== tile.index) return { path, problem: `the stored tree lacks full tile ${path}, which the records fill` };
      if (!Buffer.from(stored.hashes).equals(tile.hashes)) return { path, problem: `stored tile ${path} is not the tile the records make: the stored tree was changed` };
      if (tile.level > 0) {
        const width = await badPartialTile(this.db, tile.level, tile.index, tile.hashes);
        if (width !== undefined) return this.badPartial(tile.level, tile.index, width);
      }
    }
    return undefined;
  }

  /** The tree's edge: each level's stored partial tiles are prefixes of its last tile, and nothing is stored beyond it. */
  async checkEdge(edge: RightEdge): Promise<{ path: string; problem: string } | undefined> {
    const widths = rightEdgeWidths(edge.size);
    for (let level = 0; level <= widths.length; level++) {
      const at = widths[level] ?? { level, index: 0, width: 0 };
      if (level > 0 && at.width > 0) {
        const width = await badPartialTile(this.db, level, at.index, edge.partial(level));
        if (width !== undefined) return this.badPartial(level, at.index, width);
      }
      const beyond = await tileBeyond(this.db, level, at.index, at.width);
      if (beyond) {
        const path = tilePath(beyond.level, beyond.idx, beyond.width);
        return { path, problem: `stored tile ${path} lies beyond the ${edge.size} sealed records: the seal was cut short, or the tile was added` };
      }
    }
    return undefined;
  }

  private badPartial(level: number, index: number, width: number) {
    const path = tilePath(level, index, width);
    return { path, problem: `stored tile ${path} is not the tile the records make: the stored tree was changed` };
  }

  private async nextFull(level: number): Promise<TileRow | undefined> {
    let page = this.pages.get(level);
    if (!page) this.pages.set(level, (page = { rows: [], at: 0, next: 0, done: false }));
    if (page.at >= page.rows.length && !page.done) {
      page.rows = await fullTilesFrom(this.db, level, page.next, this.pageSize);
      page.at = 0;
      page.done = page.rows.length < this.pageSize;
      if (page.rows.length > 0) page.next = page.rows[page.rows.length - 1]!.idx + 1;
    }
    return page.rows[page.at++];
  }
}
