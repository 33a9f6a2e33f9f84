// The witnesses' cosignatures on the checkpoint Verify checked (docs/api.md section 5, item 11),
// checked in the browser against the keys of the witness policy the service publishes
// (GET /audit-logs/witnesses): C2SP tlog-cosignature `cosignature/v1` with Ed25519, each line
// `— <name> base64(key ID ‖ u64 big-endian time ‖ signature)`, its signature over
// "cosignature/v1\ntime <seconds>\n" ‖ the checkpoint's text. The note and key formats are
// src/tlog/note-format.ts's; src/tlog/cosignature.ts signs and checks the same message with
// node:crypto on the server, which a page cannot import, so the message is put together here.
import { concatBytes, equalBytes, utf8Bytes } from '../../src/tlog/bytes.js';
import { keyHashInput, parseVerifierKeyText, signaturesBy, signedMessage, type NoteParts } from '../../src/tlog/note-format.js';
import type { Witnesses } from './api.js';
import { ed25519Verify, sha256 } from './webcrypto.js';

/** The signed-note type of an Ed25519 cosignature key (C2SP tlog-cosignature). */
const COSIGNATURE_V1 = 0x04;
const TIMESTAMP_BYTES = 8;
/** A witness's clock may run a little ahead of the reader's. */
const CLOCK_SKEW_S = 300;

export interface Cosigned {
  /** The witness's name in the policy. */
  witness: string;
  /** The time the cosignature signs, ISO 8601 UTC. */
  time: string;
}

export type WitnessReport =
  /** The service asks no witness (no policy): the checkpoint rests on the log's key alone. */
  | { kind: 'no-policy' }
  | {
      kind: 'checked';
      /** Witnesses whose cosignature verified, in the policy's order. */
      cosigned: Cosigned[];
      /** Witnesses of the policy with no cosignature on this checkpoint. */
      missing: string[];
      /** Whether the service reports the cosignatures as meeting the policy's quorum. */
      quorumMet: boolean;
    }
  /** A cosignature that does not verify, or a witness key that cannot be read: named. */
  | { kind: 'bad'; reason: string };

/** "cosignature/v1\ntime <seconds>\n" ‖ the checkpoint's text: what a witness's Ed25519 key signs. */
const cosignedBytes = (text: string, seconds: bigint) => concatBytes(utf8Bytes(`cosignature/v1\ntime ${seconds}\n`), signedMessage(text));

/** Checks every cosignature line of the note by a witness of the policy; never trusts the service's list. */
export async function checkCosignatures(note: NoteParts, policy: Witnesses | undefined, witnessed: boolean, now = Date.now()): Promise<WitnessReport> {
  // No policy: a 404, or (as this service answers) a null policy naming no witness.
  if (!policy || (policy.policy as string | null) === null || policy.witnesses.length === 0) return { kind: 'no-policy' };
  const cosigned: Cosigned[] = [];
  const missing: string[] = [];
  for (const w of policy.witnesses) {
    let key;
    try {
      key = parseVerifierKeyText(w.vkey);
    } catch {
      return { kind: 'bad', reason: `the policy's key for ${w.name} cannot be read` };
    }
    if (key.keyType !== COSIGNATURE_V1 || key.publicKey.length !== 32) return { kind: 'bad', reason: `the policy's key for ${w.name} is not an Ed25519 cosignature key (type 0x04)` };
    const digest = await sha256(keyHashInput(key.name, key.keyType, key.publicKey));
    if (!equalBytes(digest.subarray(0, 4), key.keyHash)) return { kind: 'bad', reason: `the policy's key for ${w.name} does not match its key ID` };
    const lines = signaturesBy(note, key.name, key.keyHash);
    if (lines.length === 0) {
      missing.push(w.name);
      continue;
    }
    let newest: bigint | undefined;
    for (const line of lines) {
      if (line.signature.length !== TIMESTAMP_BYTES + 64) return { kind: 'bad', reason: `the cosignature by ${w.name} is not a time and an Ed25519 signature` };
      const seconds = new DataView(line.signature.buffer, line.signature.byteOffset, TIMESTAMP_BYTES).getBigUint64(0);
      if (seconds > BigInt(Math.floor(now / 1000) + CLOCK_SKEW_S)) return { kind: 'bad', reason: `the cosignature by ${w.name} is dated in the future` };
      if (!(await ed25519Verify(key.publicKey, line.signature.subarray(TIMESTAMP_BYTES), cosignedBytes(note.text, seconds)))) {
        return { kind: 'bad', reason: `the cosignature by ${w.name} does not verify with the policy's key` };
      }
      if (newest === undefined || seconds > newest) newest = seconds;
    }
    cosigned.push({ witness: w.name, time: new Date(Number(newest) * 1000).toISOString() });
  }
  return { kind: 'checked', cosigned, missing, quorumMet: witnessed };
}
