// Streams the audit log out, filtered, in constant memory: an async generator of text chunks,
// one per database read, that the HTTP route and the CLI pipe with backpressure (the next read
// happens only when the consumer wants more).
//
// NDJSON (docs/api.md 4, audit-log export): for each record covered by the newest checkpoint, in
// seq order, `{type: "record", record, sealed, seq, leaf_hash, audit_path}`; then the records
// the checkpoint does not cover yet (sealed since, then not sealed yet), in commit order, with
// `seq: null` and no proof; and last
// `{type: "checkpoint", …the checkpoint, export: {filters, records, …}}`, its note carrying the
// witnesses' cosignatures (with a witness policy, the checkpoint is the newest witnessed one,
// or the newest while none is: witnessing.service.ts). An outside auditor
// checks it with the public key alone (export.verifier.ts). CSV: the same records, one row each,
// for people and spreadsheets, with cells that a spreadsheet would run as a formula defused.
// OCSF: the same records in the same order, each line an OCSF event (ocsf.mapper.ts) with its
// evidence under `unmapped`; no checkpoint line, since a SIEM takes every line as an event: the
// checkpoint rides in the last event's `unmapped.checkpoint` (the last line is held back until
// the end to carry it), so the file still proves itself.
import type { Queryable } from '../../../db/database.js';
import { auditFilterConditions, type AuditFilters, type AuditRow } from '../audit.repository.js';
import { resolvePersonalData, resolveSearch } from '../audit.service.js';
import { PERSONAL_MARKER } from '../audit.writer.js';
import { committedRecords, lastSealBatch, latestCheckpoint } from './evidence.repository.js';
import { matchingRecords, sealedChunk, type SealedExportRow, type SealedLineRow } from './export.repository.js';
import { presentCheckpoint } from './evidence.presenter.js';
import { inclusionProof, inclusionProofNodes, nodeHashBase64, verifyInclusion, type Hash, type NodeKey, type NodeSource } from '../../../tlog/merkle.js';
import { OutputBuffer, utf8Bound } from './export.buffer.js';
import { sealedForm, type SealedRecord } from './record.sealed-form.js';
import { parsePolicy } from '../../../tlog/policy.js';
import { cosignedCheckpoint, newestWitnessed } from './witnessing.service.js';
import { readTiles, storedNodes } from './tile.store.js';
import { TILE_WIDTH, tileKey } from '../../../tlog/tiles.js';
import { ocsfEvent, type OcsfEvent } from './ocsf.mapper.js';
import { CSV_COLUMNS, csvRow } from './export.csv.js';

export type ExportFormat = 'ndjson' | 'csv' | 'ocsf';

export interface ExportOptions {
  filters: AuditFilters;
  format: ExportFormat;
  /** Records per read of those not covered by the checkpoint. */
  chunk: number;
  /** Seqs per block of the covered ones: a power of two. */
  block: number;
  /** Blocks read ahead of the one being sent (at least 1). */
  ahead: number;
  /** Throws when the caller may no longer read the log; awaited before each read. */
  stillEntitled?: () => Promise<void>;
  /** The witness policy's text (AUDIT_WITNESS_POLICY), when one is in force: text, so that it crosses to a worker thread. */
  witnessPolicy?: string;
}

const insideBlock = (from: number, to: number) => (k: NodeKey) => k.index * 2 ** k.level >= from && (k.index + 1) * 2 ** k.level <= to;

/** Characters of a hash's base64: 32 bytes, padded. */
const B64_HASH = 44;

interface Block<R> {
  size: number;
  rows: R[];
  /** Every leaf of the block in base64, when the rows are filtered (else the rows carry them). */
  leaves?: string[];
  /** The stored nodes outside the block that its records' proofs need (stored tiles). */
  outside: NodeSource;
  /** The checkpoint's root: each block's proofs are checked against it before they are written. */
  root: Hash;
}

/** Every leaf of the seqs [from, to) in base64, from the level-0 tiles that hold them. */
async function blockLeaves(db: Queryable, from: number, to: number): Promise<string[]> {
  const wanted = [];
  for (let index = Math.floor(from / TILE_WIDTH); index * TILE_WIDTH < to; index++) {
    wanted.push({ level: 0, index, width: Math.min(TILE_WIDTH, to - index * TILE_WIDTH) });
  }
  const tiles = await readTiles(db, wanted);
  const leaves: string[] = [];
  for (let seq = from; seq < to; seq++) {
    const tile = tiles.get(tileKey(0, Math.floor(seq / TILE_WIDTH)));
    const at = (seq % TILE_WIDTH) * 32;
    if (!tile || tile.length < at + 32) throw new Error(`the audit seal of seqs [${from}, ${to}) is incomplete`);
    leaves.push(tile.toString('base64', at, at + 32));
  }
  return leaves;
}

/**
 * The block of seqs [from, to) for NDJSON: its matching rows as JSON text and what their proofs
 * need besides them, read side by side (none depends on another's answer).
 */
async function readProofBlock(db: Queryable, f: AuditFilters, from: number, to: number, size: number, root: Hash): Promise<Block<SealedLineRow>> {
  const rows = sealedChunk<SealedLineRow>(db, 'json', f, from, to);
  const inside = insideBlock(from, to);
  const outsideKeys = [...inclusionProofNodes(from, size), ...inclusionProofNodes(to - 1, size)].filter((k) => !inside(k));
  const filtered = auditFilterConditions(f, 'a.').some(([, value]) => value !== undefined);
  const [r, outside, leaves] = await Promise.all([rows, storedNodes(db, outsideKeys), filtered ? blockLeaves(db, from, to) : undefined]);
  return { size, rows: r, outside, root, ...(leaves ? { leaves } : {}) };
}

/**
 * The audit paths of the records in the aligned block of seqs [from, to) of a tree of `size`
 * leaves, written as JSON arrays, and their leaf hashes. Complete subtrees inside the block are
 * hashed here from its leaves (the rows carry them when the export is unfiltered); those
 * outside it are read from the stored tree, once per block. Hashes stay in base64 from
 * PostgreSQL's text to the line (merkle.ts, nodeHashBase64): no Buffer per hash, and no base64
 * written per node.
 *
 * When the block is a complete subtree (every block but the tree's last), it is a node of the
 * RFC 6962 tree: every record's path is its siblings inside the block, then the block's own
 * path, the same for all of them. So a line writes its few lowest siblings and then the rest
 * of its path, written once for the records that share it. The last, incomplete block takes
 * the general proof per record.
 */
function blockProofs(block: Block<{ leaf: string }>, from: number, to: number) {
  const levels: string[][] = [block.leaves ?? block.rows.map((r) => r.leaf)];
  if (levels[0]!.length !== to - from) throw new Error(`the audit seal of seqs [${from}, ${to}) is incomplete`);
  for (let level = levels[0]!; level.length > 1; ) {
    const up: string[] = [];
    for (let i = 0; i + 1 < level.length; i += 2) up.push(nodeHashBase64(level[i]!, level[i + 1]!));
    levels.push(up);
    level = up;
  }
  const { outside, size, root } = block;
  const inside = insideBlock(from, to);
  const get = (k: NodeKey): Hash => {
    if (inside(k)) {
      const hash = levels[k.level]?.[k.index - from / 2 ** k.level];
      if (hash) return Buffer.from(hash, 'base64');
    }
    return outside(k);
  };
  // The block's first record's proof must lead to the signed root: a stored tree changed behind
  // the service's back is not served as proofs that fail (the export stops instead).
  const firstLeaf = Buffer.from(levels[0]![0]!, 'base64');
  if (!verifyInclusion(firstLeaf, from, size, inclusionProof(from, size, get), root)) {
    throw new Error(`the stored audit tree around seqs [${from}, ${to}) does not agree with the signed checkpoint: run \`teamlog audit verify\``);
  }
  /** Writes `"<base64>"` of the hash at index j (from the block's start) of a level. */
  const writeQuoted = (out: OutputBuffer, level: number, j: number) => {
    out.byte(QUOTE);
    out.latin1(levels[level]![j]!);
    out.byte(QUOTE);
  };
  const leafHash = (out: OutputBuffer, seq: number) => writeQuoted(out, 0, seq - from);

  const depth = levels.length - 1;
  if (levels[0]!.length !== 2 ** depth) {
    let last: { seq: number; text: Buffer } | undefined;
    const path = (seq: number) => (last?.seq === seq ? last : (last = { seq, text: Buffer.from(JSON.stringify(inclusionProof(seq, size, get).map(b64)), 'latin1') })).text;
    return { leafHash, pathBound: (seq: number) => path(seq).length, writePath: (out: OutputBuffer, seq: number) => out.bytes(path(seq)) };
  }
  // The entries above level GROUP_LEVEL, and the block's own path, are the same for the 2^GROUP_LEVEL
  // records under one node of that level: written out once per such group, each entry with its
  // leading comma, so that a line writes its few lowest entries and then one run of bytes.
  const above = inclusionProof(from, size, get).slice(depth).map((h) => `,"${b64(h)}"`).join('');
  const low = Math.min(GROUP_LEVEL, depth);
  const groupPaths: Buffer[] = [];
  const groupPath = (g: number) =>
    (groupPaths[g] ??= (() => {
      let text = '';
      for (let level = low, j = g; level < depth; level++, j = Math.floor(j / 2)) text += `,"${levels[level]![j ^ 1]!}"`;
      return Buffer.from(text + above, 'latin1');
    })());
  return {
    leafHash,
    /** At least the bytes writePath writes for this seq. */
    pathBound: (seq: number) => 2 + low * (B64_HASH + 3) + groupPath(Math.floor((seq - from) / 2 ** low)).length,
    writePath(out: OutputBuffer, seq: number) {
      out.byte(LEFT_BRACKET);
      let j = seq - from;
      for (let level = 0; level < low; level++, j = Math.floor(j / 2)) {
        if (level > 0) out.byte(COMMA);
        writeQuoted(out, level, j ^ 1);
      }
      // The first entry drops its comma when the path has no entry below the group's.
      const rest = groupPath(j);
      out.bytes(low > 0 ? rest : rest.subarray(1));
      out.byte(RIGHT_BRACKET);
    },
  };
}

/** Records under one node of this level share their path above it (blockProofs). */
const GROUP_LEVEL = 4;

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/** A record's audit path as an array, for a line built as an object (OCSF) rather than written in pieces. */
function auditPath(proofs: ReturnType<typeof blockProofs>, seq: number): string[] {
  const scratch = new OutputBuffer(proofs.pathBound(seq));
  proofs.writePath(scratch, seq);
  return JSON.parse(scratch.take()!.toString('latin1')) as string[];
}

/**
 * OCSF lines into the output buffer, each written when the next arrives: the last stays held
 * until the export ends, to carry the checkpoint (one event held: memory stays constant).
 */
function heldBackLines(out: OutputBuffer) {
  let held: OcsfEvent | undefined;
  const write = (event: OcsfEvent): Buffer | undefined => {
    const line = `${JSON.stringify(event)}\n`;
    const handedOut = out.room(utf8Bound(line));
    out.utf8(line);
    return handedOut;
  };
  return {
    /** Holds this event; writes the one held before. Answers a full buffer to send, if one was handed out. */
    push(event: OcsfEvent): Buffer | undefined {
      const before = held;
      held = event;
      return before && write(before);
    },
    /** Writes the held event with `last` added to its `unmapped`. */
    end(last: Record<string, unknown>): Buffer | undefined {
      if (!held) return undefined;
      const event = { ...held, unmapped: { ...(held.unmapped as Record<string, unknown>), ...last } };
      held = undefined;
      return write(event);
    },
  };
}

const LINE_START = Buffer.from('{"type":"record","record":');
const SEALED = Buffer.from(',"sealed":');
const SEQ = Buffer.from(',"seq":');
const LEAF_HASH = Buffer.from(',"leaf_hash":');
const AUDIT_PATH = Buffer.from(',"audit_path":');
const LINE_END = Buffer.from('}\n');
const [LEFT_BRACKET, COMMA, RIGHT_BRACKET, QUOTE] = [0x5b, 0x2c, 0x5d, 0x22];
/** Bytes of a line besides its two records and its path, the seq's digits included. */
const LINE_FIXED = LINE_START.length + SEALED.length + SEQ.length + 16 + LEAF_HASH.length + 46 + AUDIT_PATH.length + LINE_END.length;

/**
 * What `produce` makes of each block of seqs [0, size), in order. `ahead` blocks are under way
 * while one is sent: each is read as soon as it starts and written out once the block before
 * it has been (`turn`), so the database works on the next blocks while this process writes
 * one. A block is read and written out in one go, so what waits for a slow consumer is its
 * output (bytes outside the JavaScript heap), not its rows and their strings, which waiting
 * long enough would promote to the old generation. (A block still under way when the consumer
 * stops must not become an unhandled rejection.)
 */
async function* blockwise<T>(
  size: number,
  block: number,
  ahead: number,
  produce: (from: number, to: number, turn: Promise<unknown>) => Promise<T>,
): AsyncGenerator<T> {
  const queue: Array<Promise<T>> = [];
  let turn: Promise<unknown> = Promise.resolve();
  let nextFrom = 0;
  const fill = () => {
    for (; queue.length < ahead && nextFrom < size; nextFrom += block) {
      const next = produce(nextFrom, Math.min(nextFrom + block, size), turn);
      turn = next.catch(() => {});
      queue.push(next);
    }
  };
  fill();
  while (queue.length > 0) {
    const current = await queue.shift()!;
    fill();
    yield current;
  }
}

/**
 * How a personal value's reference shows in a sealed form's JSON text: as the key
 * `"$personal"`. Looked for without its quotes: a pattern that starts with `"` made V8's
 * search stop at every quote of the text (200 ns a record, against 12).
 */
const PERSONAL_KEY = PERSONAL_MARKER;

/**
 * Each row's API form as JSON text: its sealed form with personal values resolved (or
 * "[redacted]"). Most records name none and their sealed text is their API form; a row whose
 * text holds the marker at all (a string may hold it too) is parsed and resolved exactly.
 */
async function apiForms(db: Queryable, rows: SealedLineRow[]): Promise<string[]> {
  const forms = rows.map((r) => r.record_json);
  const marked: number[] = [];
  for (let i = 0; i < rows.length; i++) if (rows[i]!.record_json.includes(PERSONAL_KEY)) marked.push(i);
  if (marked.length === 0) return forms;
  const parsed = marked.map((i) => JSON.parse(rows[i]!.record_json) as AuditRow);
  const resolved = await resolvePersonalData(db, parsed);
  marked.forEach((i, k) => {
    if (resolved[k] !== parsed[k]) forms[i] = JSON.stringify(sealedForm(resolved[k]!));
  });
  return forms;
}

export async function* exportAuditLog(db: Queryable, opts: ExportOptions): AsyncGenerator<string | Buffer> {
  const { format, chunk, block, ahead, stillEntitled } = opts;
  // The search (q=) parsed and its emails looked up once, at the start; the summary line shows the filters as given.
  const filters = await resolveSearch(db, opts.filters);
  const policy = opts.witnessPolicy === undefined ? undefined : parsePolicy(opts.witnessPolicy);
  const checkpoint = (policy && (await newestWitnessed(db, policy))?.row) ?? (await latestCheckpoint(db));
  const size = checkpoint?.tree_size ?? 0;
  const root = checkpoint ? Buffer.from(checkpoint.root_hash) : Buffer.alloc(32);
  let sealedCount = 0;
  let pendingCount = 0;
  const out = new OutputBuffer();
  const ocsf = format === 'ocsf' ? heldBackLines(out) : undefined;
  if (format === 'csv') yield `${CSV_COLUMNS.join(',')}\r\n`;

  // Proofs block by block: the records of an aligned block of seqs share every proof node
  // above the block (fetched once per block), and the nodes inside it are hashed here from the
  // block's leaves, so a proof costs no database lookup of its own.
  if (format === 'csv') {
    // Rows written into the output buffer as they are made: a block joined into one string was
    // a large object, born in the old generation, that waited there for a slow consumer.
    const csvBlock = async (from: number, to: number, turn: Promise<unknown>): Promise<Buffer[]> => {
      await stillEntitled?.();
      const rows = await sealedChunk<SealedExportRow>(db, 'columns', filters, from, to);
      await turn;
      sealedCount += rows.length;
      const records = await resolvePersonalData(db, rows);
      const full: Buffer[] = [];
      records.forEach((r, i) => {
        const line = csvRow(r, rows[i]!.seq, rows[i]!.leaf);
        const handedOut = out.room(utf8Bound(line));
        if (handedOut) full.push(handedOut);
        out.utf8(line);
      });
      return full;
    };
    for await (const buffers of blockwise(size, block, ahead, csvBlock)) yield* buffers;
  } else {
    // The full buffers of each block; the last, partly filled, goes on with the next block's lines.
    const ndjsonBlock = async (from: number, to: number, turn: Promise<unknown>): Promise<Buffer[]> => {
      await stillEntitled?.();
      const current = await readProofBlock(db, filters, from, to, size, root);
      await turn;
      const rows = current.rows;
      if (rows.length === 0) return [];
      sealedCount += rows.length;
      const records = await apiForms(db, rows);
      // Each line is {type, record, sealed, seq, leaf_hash, audit_path}, written in pieces
      // (export.buffer.ts says why).
      const proofs = blockProofs(current, from, to);
      const full: Buffer[] = [];
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i]!;
        const sealed = row.record_json;
        const record = records[i]!;
        if (ocsf) {
          const evidence = { seq: row.seq, leaf_hash: row.leaf, audit_path: auditPath(proofs, row.seq), tree_size: size };
          const handedOut = ocsf.push(ocsfEvent({ record: JSON.parse(record) as SealedRecord, sealed: JSON.parse(sealed) as SealedRecord, ...evidence }));
          if (handedOut) full.push(handedOut);
          continue;
        }
        const handedOut = out.room(LINE_FIXED + utf8Bound(record) + utf8Bound(sealed) + proofs.pathBound(row.seq));
        if (handedOut) full.push(handedOut);
        out.bytes(LINE_START);
        const recordAt = out.position;
        out.utf8(record);
        const recordEnd = out.position;
        out.bytes(SEALED);
        // Most records name no personal value: their sealed form is their API form, whose bytes are copied.
        if (sealed === record) out.again(recordAt, recordEnd);
        else out.utf8(sealed);
        out.bytes(SEQ);
        out.integer(row.seq);
        out.bytes(LEAF_HASH);
        proofs.leafHash(out, row.seq);
        out.bytes(AUDIT_PATH);
        proofs.writePath(out, row.seq);
        out.bytes(LINE_END);
      }
      return full;
    };
    for await (const buffers of blockwise(size, block, ahead, ndjsonBlock)) yield* buffers;
  }
  const last = out.take();
  if (last) yield last;

  // Records the checkpoint does not cover yet, in commit order: those sealed since it (in seq
  // order), then those not sealed yet.
  async function* pendingLines(rows: AuditRow[]): AsyncGenerator<string | Buffer> {
    const records = await resolvePersonalData(db, rows);
    if (format === 'csv') yield records.map((r) => csvRow(r, null, null)).join('');
    else if (!ocsf) yield records.map((r, i) => `${JSON.stringify({ type: 'record', record: sealedForm(r), sealed: sealedForm(rows[i]!), seq: null, leaf_hash: null, audit_path: null })}\n`).join('');
    else {
      for (const [i, r] of records.entries()) {
        const handedOut = ocsf.push(ocsfEvent({ record: sealedForm(r), sealed: sealedForm(rows[i]!), seq: null, leaf_hash: null, audit_path: null }));
        if (handedOut) yield handedOut;
      }
      const written = out.take();
      if (written) yield written;
    }
  }
  // One position for both: a record the sealer takes meanwhile is still past it, so none is missed.
  const sealedThen = await lastSealBatch(db);
  const sealedSize = sealedThen?.next_seq ?? 0;
  for (let from = size; from < sealedSize; from += chunk) {
    await stillEntitled?.();
    const rows = await sealedChunk<SealedExportRow>(db, 'columns', filters, from, Math.min(from + chunk, sealedSize));
    pendingCount += rows.length;
    if (rows.length > 0) yield* pendingLines(rows);
  }
  for await (const unsealed of committedRecords.scan(db, sealedThen, chunk)) {
    await stillEntitled?.();
    const rows = await matchingRecords(db, filters, unsealed.map((r) => r.id));
    pendingCount += rows.length;
    if (rows.length > 0) yield* pendingLines(rows);
  }

  if (format !== 'csv') {
    const summary = { filters: opts.filters, records: sealedCount + pendingCount, records_with_proof: sealedCount, records_without_proof: pendingCount };
    const shown = checkpoint ? presentCheckpoint(checkpoint, await cosignedCheckpoint(db, checkpoint, policy)) : { tree_size: 0, note: null };
    if (!ocsf) yield `${JSON.stringify({ type: 'checkpoint', ...shown, export: summary })}\n`;
    // An OCSF export that matched nothing has no event to carry it, and no proof to check against it.
    else yield* [ocsf.end({ checkpoint: { ...shown, export: summary } }), out.take()].filter((b) => b !== undefined);
  }
}
