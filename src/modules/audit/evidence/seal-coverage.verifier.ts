// Which records the seal holds, for a verification (log.verifier.ts): the ids read so far, which
// find a record sealed twice as the seal is read, and at the end a record the sealer's position
// says it took but that has no seal, which only an insert behind the service's back makes.
import type { Queryable } from '../../../db/database.js';
import { nextPair } from '../../../db/commit-order.js';
import { firstUnsealedTaken, maxRecordId, type Consumed, type SealBatchRow } from './evidence.repository.js';

/** A set of record ids: a bitmap up to 2^32 (ids are dense there), a Set beyond (ids only tampering makes). */
export class IdSet {
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
 * The first record the sealer's last batch says it had taken that is not among the `sealed` ids,
 * as the report names it; undefined when there is none, or nothing was ever sealed.
 */
export async function takenNeverSealed(
  db: Queryable,
  lastBatch: SealBatchRow | undefined,
  sealed: IdSet,
  range: number,
): Promise<{ problem: string; first_bad_id: number } | undefined> {
  if (!lastBatch) return undefined;
  const id = await unsealedTaken(db, consumedBy(lastBatch), sealed, range);
  if (id === undefined) return undefined;
  return { problem: `record ${id} sits among sealed records in commit order but was never sealed: it was inserted behind the service's back`, first_bad_id: id };
}

/** What the sealer's last batch says it has taken (db/commit-order.ts, nextPair). */
function consumedBy(last: SealBatchRow): Consumed {
  const pair = nextPair(last);
  const upper = last.snapshot !== null ? { snapshot: last.snapshot } : { xact: last.after_xact!, id: last.after_id! };
  return { upper, unfinished: pair.upper !== null ? { lower: pair.lower, afterId: pair.afterId } : null };
}

/**
 * PostgreSQL looks, given the seal's ids a range at a time as a bitmap: reading every id into
 * Node instead made an object per record that outlived the young generation, garbage the scan
 * after a verification then carried as its own RSS (docs/performance.md, "What the profiles showed").
 */
async function unsealedTaken(db: Queryable, consumed: Consumed, sealed: IdSet, range: number): Promise<number | undefined> {
  const maxId = await maxRecordId(db);
  for (let from = 0; from <= maxId; from += range) {
    const found = await firstUnsealedTaken(db, from, sealed.bitmap(from, range), consumed);
    if (found !== undefined) return found;
  }
  return undefined;
}
