// The decimal text of an integer, without V8's number-to-string cache. String(n) (and `${n}`,
// n.toString(), concatenation) keeps each string it makes in a heap-wide cache that outlives
// young-generation collections, so the verifier, the sealer and the export, which write out
// millions of distinct ids and seqs, turned every one of them into old-generation garbage:
// 34 MB of it for a million and a half records, and the server's heap at 130 MB between full
// collections. Built from a table of the thousand three-digit groups instead. It imports
// nothing: jcs.ts, which uses it, is bundled into the audit console too.

const GROUP = Array.from({ length: 1000 }, (_, i) => String(i));
const PADDED_GROUP = GROUP.map((g) => g.padStart(3, '0'));

/** String(n) for a safe integer (-0 gives "0", as String does). */
export function integerText(n: number): string {
  if (n < 0) return '-' + integerText(-n);
  if (n < 1000) return GROUP[n]!;
  let text = PADDED_GROUP[n % 1000]!;
  for (n = Math.floor(n / 1000); n >= 1000; n = Math.floor(n / 1000)) text = PADDED_GROUP[n % 1000]! + text;
  return GROUP[n]! + text;
}
