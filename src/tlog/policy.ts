// Transparency log trust policies, C2SP tlog-policy (https://c2sp.org/tlog-policy): which logs may
// sign a checkpoint, which witnesses may cosign it, and the quorum of cosignatures that makes it
// valid. A policy file is read strictly: a line that is not exactly one of the spec's forms is an
// error naming the line, never skipped, since a skipped `witness` or `group` line would quietly
// change whom a verifier trusts.
//
// Witness and group names share one namespace and are opaque: compared as written, with no
// Unicode normalization. Groups nest (a member is a witness or a group defined on an earlier line),
// and each name is a member at most once in the whole file, so the quorum is a tree whose leaves
// are witnesses; `quorum none` asks for no cosignature at all.
import { checkCosignatures, parseCosignatureVerifierKey, type CosignatureVerifier } from './cosignature.js';
import { ed25519PublicKeyRaw, openNote, parseCheckpoint, parseVerifierKey, type Checkpoint, type NoteVerifier } from './signed-note.js';
import { NoteError } from './note-format.js';

/** The predefined quorum that asks for no cosignature; it names nothing, so it cannot be a member. */
export const QUORUM_NONE = 'none';

export interface PolicyLog { verifier: NoteVerifier; vkey: string; url?: string }
export interface PolicyWitness { name: string; verifier: CosignatureVerifier; vkey: string; url?: string }
/** A group is witnessed when at least `threshold` of its members are (`any` is 1, `all` is every member). */
export interface PolicyGroup { name: string; threshold: number; members: string[] }

export interface Policy {
  logs: PolicyLog[];
  witnesses: PolicyWitness[];
  groups: PolicyGroup[];
  /** A witness's or a group's name, or QUORUM_NONE. */
  quorum: string;
}

export class PolicyError extends Error {
  /** 1-based line of the policy file, absent for a problem of the whole file. */
  readonly line?: number;
  constructor(message: string, line?: number) {
    super(line === undefined ? `policy: ${message}` : `policy line ${line}: ${message}`);
    this.name = 'PolicyError';
    this.line = line;
  }
}

// Tab, newline, printable ASCII and any octet with the high bit set (here: any non-ASCII code
// point, the file being read as text); CR, DEL and the other control characters are refused.
function forbiddenChar(line: string): number | undefined {
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return c;
  }
  return undefined;
}
const THRESHOLD = /^[1-9][0-9]*$/;

/** A line's items: runs of anything but space and tab, the only whitespace the spec knows. */
const itemsOf = (line: string): string[] => line.split(/[ \t]+/).filter((s) => s !== '');

/** The public key a vkey wraps, whatever its name and key ID: what makes two entries duplicates. */
const keyMaterial = (raw: Buffer): string => raw.toString('base64');

function keyOf<T>(read: (vkey: string) => T, vkey: string, what: string, lineNo: number): T {
  try {
    return read(vkey);
  } catch (err) {
    if (err instanceof NoteError) throw new PolicyError(`invalid ${what} vkey: ${err.message}`, lineNo);
    throw err;
  }
}

/** Builds a policy line by line, holding what the later lines may refer to. */
class PolicyReader {
  readonly policy: Policy = { logs: [], witnesses: [], groups: [], quorum: QUORUM_NONE };
  #quorumLine?: number;
  readonly #defined = new Set<string>();
  readonly #members = new Set<string>();
  readonly #logKeys = new Set<string>();
  readonly #witnessKeys = new Set<string>();

  line(items: string[], n: number): void {
    const [keyword, ...args] = items as [string, ...string[]];
    if (keyword === 'log') this.#log(args, n);
    else if (keyword === 'witness') this.#witness(args, n);
    else if (keyword === 'group') this.#group(args, n);
    else if (keyword === 'quorum') this.#quorum(args, n);
    else throw new PolicyError(`unknown keyword ${JSON.stringify(keyword)} (expected log, witness, group or quorum)`, n);
  }

  end(): Policy {
    if (this.#quorumLine === undefined) throw new PolicyError('no quorum line (a policy needs exactly one; "quorum none" asks for no cosignature)');
    return this.policy;
  }

  #log(args: string[], n: number): void {
    const [vkey, url, ...extra] = args;
    if (vkey === undefined || extra.length > 0) throw new PolicyError('expected "log <vkey> [<url>]"', n);
    const verifier = keyOf(parseVerifierKey, vkey, 'log', n);
    const raw = keyMaterial(ed25519PublicKeyRaw(verifier.publicKey));
    if (this.#logKeys.has(raw)) throw new PolicyError('duplicate log: another log line has the same public key', n);
    this.#logKeys.add(raw);
    this.policy.logs.push(url === undefined ? { verifier, vkey } : { verifier, vkey, url });
  }

  #witness(args: string[], n: number): void {
    const [name, vkey, url, ...extra] = args;
    if (name === undefined || vkey === undefined || extra.length > 0) throw new PolicyError('expected "witness <name> <vkey> [<url>]"', n);
    this.#define(name, n);
    const verifier = keyOf(parseCosignatureVerifierKey, vkey, 'witness', n);
    const raw = keyMaterial(verifier.publicKeyRaw);
    if (this.#witnessKeys.has(raw)) throw new PolicyError(`duplicate witness: ${JSON.stringify(name)} has the public key of an earlier witness`, n);
    this.#witnessKeys.add(raw);
    this.policy.witnesses.push(url === undefined ? { name, verifier, vkey } : { name, verifier, vkey, url });
  }

  #group(args: string[], n: number): void {
    const [name, k, ...members] = args;
    if (name === undefined || k === undefined || members.length === 0) throw new PolicyError('expected "group <name> <k|any|all> <member>..." with at least one member', n);
    for (const m of members) {
      if (m === QUORUM_NONE) throw new PolicyError(`"${QUORUM_NONE}" cannot be a group member`, n);
      if (!this.#defined.has(m)) throw new PolicyError(`group ${JSON.stringify(name)} names ${JSON.stringify(m)}, which no earlier line defines`, n);
      if (this.#members.has(m)) throw new PolicyError(`${JSON.stringify(m)} is already a group member (each name may be a member once)`, n);
      this.#members.add(m);
    }
    const threshold = k === 'any' ? 1 : k === 'all' ? members.length : THRESHOLD.test(k) ? Number(k) : NaN;
    if (!(threshold >= 1 && threshold <= members.length)) {
      throw new PolicyError(`group ${JSON.stringify(name)}: threshold ${JSON.stringify(k)} must be any, all or a decimal from 1 to ${members.length}`, n);
    }
    this.#define(name, n);
    this.policy.groups.push({ name, threshold, members });
  }

  #quorum(args: string[], n: number): void {
    const [name, ...extra] = args;
    if (name === undefined || extra.length > 0) throw new PolicyError('expected "quorum <name>"', n);
    if (this.#quorumLine !== undefined) throw new PolicyError(`a second quorum line (the first is line ${this.#quorumLine})`, n);
    if (name !== QUORUM_NONE && !this.#defined.has(name)) throw new PolicyError(`quorum ${JSON.stringify(name)} names no witness or group defined on an earlier line`, n);
    this.#quorumLine = n;
    this.policy.quorum = name;
  }

  #define(name: string, n: number): void {
    if (name === QUORUM_NONE) throw new PolicyError(`"${QUORUM_NONE}" is reserved and cannot name a witness or a group`, n);
    if (this.#defined.has(name)) throw new PolicyError(`${JSON.stringify(name)} is already defined (witnesses and groups share one namespace)`, n);
    this.#defined.add(name);
  }
}

/**
 * Reads a policy file (its text, decoded from UTF-8 by the caller). Throws PolicyError naming the
 * line on anything the spec does not allow: an unknown keyword, a missing or extra item (there are
 * no trailing comments), a vkey that does not parse or whose key ID does not match (a log's must
 * be an Ed25519 note key, type 0x01; a witness's an Ed25519 cosignature key, type 0x04), a duplicate
 * key, name or membership, a reference to a name not defined above, a threshold outside 1..n, or
 * not exactly one quorum line.
 */
export function parsePolicy(text: string): Policy {
  const reader = new PolicyReader();
  // The last line's newline is not required: an editor that leaves it out changes nothing.
  text.split('\n').forEach((line, i) => {
    const bad = forbiddenChar(line);
    if (bad !== undefined) throw new PolicyError(`control character U+${bad.toString(16).padStart(4, '0')} (only tab and newline are allowed)`, i + 1);
    const items = itemsOf(line);
    if (items.length === 0 || items[0]!.startsWith('#')) return;
    reader.line(items, i + 1);
  });
  return reader.end();
}

/** The policy as a file: one line per entry, groups' thresholds as numbers; parsePolicy reads it back the same. */
export function formatPolicy(policy: Policy): string {
  const withUrl = (line: string, url?: string) => `${url === undefined ? line : `${line} ${url}`}\n`;
  return [
    ...policy.logs.map((l) => withUrl(`log ${l.vkey}`, l.url)),
    ...policy.witnesses.map((w) => withUrl(`witness ${w.name} ${w.vkey}`, w.url)),
    ...policy.groups.map((g) => `group ${g.name} ${g.threshold} ${g.members.join(' ')}\n`),
    `quorum ${policy.quorum}\n`,
  ].join('');
}

export interface QuorumVerdict {
  met: boolean;
  /** The witnesses and groups, among those the quorum depends on, that are witnessed. */
  satisfied: string[];
  /** The groups the quorum depends on that are not witnessed, with how many members they have and need. */
  unmet: Array<{ name: string; threshold: number; have: number; of: number }>;
  /** The witnesses the quorum depends on whose cosignature is absent (empty when it is met). */
  missing: string[];
}

/**
 * Whether the witnesses named in `cosigned` (those whose cosignatures verified) meet the policy's
 * quorum, and if not, which groups fall short and which witnesses did not cosign. Names that are
 * not the policy's witnesses count for nothing.
 */
export function evaluateQuorum(policy: Policy, cosigned: Iterable<string>): QuorumVerdict {
  const verdict: QuorumVerdict = { met: true, satisfied: [], unmet: [], missing: [] };
  if (policy.quorum === QUORUM_NONE) return verdict;
  const signed = new Set(cosigned);
  const witnesses = new Set(policy.witnesses.map((w) => w.name));
  const groups = new Map(policy.groups.map((g) => [g.name, g]));

  // Each name is a member at most once, so the quorum is a tree: every node is visited once.
  // Answers the witnesses below `name` whose cosignature would help: none once it is witnessed.
  const missingBelow = (name: string): string[] => {
    const group = groups.get(name);
    let missing: string[];
    if (group) {
      const below = group.members.map(missingBelow);
      const have = below.filter((m) => m.length === 0).length;
      missing = have >= group.threshold ? [] : below.flat();
      if (missing.length > 0) verdict.unmet.push({ name, threshold: group.threshold, have, of: group.members.length });
    } else {
      missing = witnesses.has(name) && signed.has(name) ? [] : [name];
    }
    if (missing.length === 0) verdict.satisfied.push(name);
    return missing;
  };
  verdict.missing = missingBelow(policy.quorum);
  verdict.met = verdict.missing.length === 0;
  return verdict;
}

/** "group g has 1 of the 2 it needs; no cosignature from w2, w3": why a quorum is not met, for people. */
export function describeUnmetQuorum(verdict: QuorumVerdict): string {
  const groups = verdict.unmet.map((g) => `group ${g.name} has ${g.have} of the ${g.threshold} it needs (of ${g.of})`);
  const missing = verdict.missing.length > 0 ? [`no cosignature from ${verdict.missing.join(', ')}`] : [];
  return [...groups, ...missing].join('; ');
}

export type PolicyCheckpointVerdict =
  | { ok: true; checkpoint: Checkpoint; log: NoteVerifier; cosignatures: Array<{ witness: string; timestamp: number }>; quorum: QuorumVerdict }
  | { ok: false; problem: string; quorum?: QuorumVerdict };

export interface PolicyCheckOptions {
  /** Logs known from context, for a policy that lists none (the spec allows it); added to the policy's. */
  logs?: NoteVerifier[];
  /** Refuse cosignatures dated after this (seconds since the epoch): the spec lets verifiers refuse the future. */
  notAfter?: number;
}

/**
 * The policy's rule for a checkpoint's signed note: signed by one of its logs, whose key name is
 * the checkpoint's origin, and cosigned by witnesses that meet the quorum. A cosignature line by a
 * policy witness that does not verify makes the whole note invalid, as signed-note says a note
 * with a failing signature by a known key should be; lines by keys the policy does not know are
 * ignored.
 */
export function verifyCheckpointWithPolicy(note: string, policy: Policy, options: PolicyCheckOptions = {}): PolicyCheckpointVerdict {
  const logs = [...policy.logs.map((l) => l.verifier), ...(options.logs ?? [])];
  if (logs.length === 0) return { ok: false, problem: 'the policy names no log, and none was given' };
  let opened: ReturnType<typeof openNote>;
  let checkpoint: Checkpoint;
  try {
    opened = openNote(note, logs);
    checkpoint = parseCheckpoint(opened.text);
  } catch (err) {
    if (err instanceof NoteError) return { ok: false, problem: err.code === 'invalid-signature' ? `the log's signature does not verify (${err.message})` : err.message };
    throw err;
  }
  const log = opened.signatures.find((s) => s.verifiedBy?.name === checkpoint.origin)?.verifiedBy;
  if (!log) return { ok: false, problem: `the checkpoint of origin ${JSON.stringify(checkpoint.origin)} is not signed by a log of that name` };

  const checks = checkCosignatures(opened.text, opened.signatures, policy.witnesses.map((w) => w.verifier), options.notAfter);
  const invalid = checks.flatMap((c) => c.problems);
  if (invalid.length > 0) return { ok: false, problem: `invalid cosignature: ${invalid.join('; ')}` };
  const cosignatures = policy.witnesses.flatMap((w, i) => {
    const timestamp = checks[i]!.timestamp;
    return timestamp === undefined ? [] : [{ witness: w.name, timestamp }];
  });
  const quorum = evaluateQuorum(policy, cosignatures.map((c) => c.witness));
  if (!quorum.met) return { ok: false, problem: `the quorum ${JSON.stringify(policy.quorum)} is not met: ${describeUnmetQuorum(quorum)}`, quorum };
  return { ok: true, checkpoint, log, cosignatures, quorum };
}
