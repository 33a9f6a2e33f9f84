// Verifies the audit log against its own evidence (docs/audit-integrity.md §5–6): recomputes
// every sealed record's leaf, rebuilds the tree in O(log n) memory, and checks every signed
// checkpoint on the way. Reads in chunks outside any transaction, so that on PGlite (one
// connection) the service answers between them. The first problem found ends the run and
// names the first bad record.
import type { Queryable } from '../../../db/database.js';
import { checkCheckpoint } from './checkpoint-check.js';
import {
  checkpointsAfter, firstUnsealedBehind, latestCheckpoint, maxRecordId, sealCursor, sealedCanonicalFrom, sealedSize, signingKeys, type CheckpointRow, type SealedCanonicalRow,
} from './evidence.repository.js';
import { asHash, TreeBuilder, type Hash } from './merkle.js';
import { personalRefOf, PERSONAL_MARKER } from '../audit.writer.js';
import { personalDataMatches, storedPersonalData, type PersonalDataRow } from '../personal-data.js';
import { canonicalLeaf } from './sealed-form.js';
import { parseVerifierKey, type NoteVerifier } from './signed-note.js';

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
  onProgress?: (checked: number, total: number) => void;
}

export interface ReadPlan {
  /** Sealed records per read. */
  chunk: number;
  /** Reads under way ahead of the one being checked. */
  ahead: number;
}

/**
 * Small reads, one ahead. Measured on a million records on PostgreSQL: 20,000-record reads were
 * promoted out of the young generation whole (a third of the run was garbage collection), and
 * reads further ahead, each on a connection of its own, cost more than they overlapped. On
 * PGlite (one connection, one thread) a read of 2,000 keeps a request waiting ~20 ms at most.
 */
const DEFAULT_READS: ReadPlan = { chunk: 2000, ahead: 1 };

const CHECKPOINT_PAGE = 1000;
const ID_RANGE = 100_000;

export async function verifyDatabase(db: Queryable, opts: VerifyOptions): Promise<VerifyReport> {
  // The log as it stood when this run began: the checkpoints that existed then (read first) and
  // the seal as far as they reach (read after them, so it covers every one of them). What the
  // sealer adds while the run goes on is left for the next run, not taken for a truncation.
  const lastCheckpointId = (await latestCheckpoint(db))?.id ?? 0;
  const total = await sealedSize(db);
  const keys = new Map((await signingKeys(db)).map((k) => [k.key_id, parseVerifierKey(k.note_verifier_key)]));
  const checkpoints = checkpointStream(db, lastCheckpointId);
  const builder = new TreeBuilder();
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

  function report(ok: boolean, problem?: string, firstBadId?: number): VerifyReport {
    const head = builder.size > 0 ? { seq: builder.size - 1, tree_size: builder.size, root_hash: builder.root().toString('base64') } : null;
    return {
      ok, records_checked: checked, checkpoints_checked: checkpointsChecked, head, personal_values_checked: personalKeys.length > 0 ? personalChecked : null,
      ...(firstBadId !== undefined ? { first_bad_id: firstBadId } : {}), ...(problem ? { problem } : {}),
    };
  }

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
      if (row.head === null) {
        gone ??= row.record_id;
        builder.append(asHash(row.leaf_hash));
        seq++;
        continue;
      }
      const id = row.record_id;
      if (gone !== undefined) return report(false, `record ${gone}, sealed before record ${id}, no longer exists`, id);
      const metadata = parseMetadata(row.metadata);
      const leaf = metadata && leafOf(row.head, metadata.value, row.tail);
      if (!leaf) return report(false, `record ${id}: its sealed form is not JSON that can be canonicalized`, id);
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
      builder.append(leaf);
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
  const inserted = await insertedRecord(db);
  if (inserted !== undefined) return report(false, `record ${inserted} sits among sealed records in commit order but was never sealed: it was inserted behind the service's back`, inserted);
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

/** A record at or behind the sealer's cursor in commit order that has no seal. */
async function insertedRecord(db: Queryable): Promise<number | undefined> {
  const cursor = await sealCursor(db);
  if (!cursor) return undefined;
  const maxId = await maxRecordId(db);
  for (let from = 1; from <= maxId; from += ID_RANGE) {
    const id = await firstUnsealedBehind(db, from, from + ID_RANGE, cursor);
    if (id !== undefined) return id;
  }
  return undefined;
}
