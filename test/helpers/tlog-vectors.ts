// Test vectors of the transparency-log specs that several test files check against, kept once:
// a real cosigned checkpoint of the public witness network, a Go note key pair, and Go's private
// key encoding read without the module under test.
import assert from 'node:assert/strict';
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { inclusionProof, leafHash, TreeBuilder, type Hash } from '../../src/tlog/merkle.js';

// A checkpoint of the Sunlight CT log arche2025h1.staging.ct.transparency.dev, as served with its
// cosignatures, from florolf/tlog-scales tests/test_signing.py (TestCheckpointSigning). Its first
// line is the log's RFC 6962 signature (type 0x05), its second the log's Ed25519 note signature.
export const REAL_TEXT = 'arche2025h1.staging.ct.transparency.dev\n1432088532\nU7WM79jrzyhGZ5/GUBTpM7NzwdyfFx61t3RovgcC4Ro=\n';
export const REAL_NOTE = `${REAL_TEXT}
— arche2025h1.staging.ct.transparency.dev zTM8sQAAAZ5W0WdjBAMARjBEAiBjW5IQf9pvsYLfQFX6hoGREPMHbdQ3urbllzalApkptQIgIpwtEroeW2BXaHAI4kJXFbon5Ch9MNL5zRNZ55lvGt0=
— arche2025h1.staging.ct.transparency.dev ui8GwCF1+kWqZrxGdhj4aX3gcw7XUlXQQabg/27lefwhUkzbC3NygNI75MdhL1bfTW9g8Ei59RA23oHP7Ry1k3ZFWwQ=
— transparency.dev/DEV:witness-little-garden 2AQqhwAAAABqEiEgzgFIqqhbUoDwjMWE6UP8nd8/KYTzwZ2rhIgcqoXHAwVkjZr4AscylP3v7sEodkRAErumC2q44vdgJY096st5BQ==
— witness1.smartit.nu/witness1 pIyCDwAAAABqEiEghIp82KWebrw7/oHQwlTAm3g2RKS4+eebl8eO0WH+/iEcxZ75W3u5hNI7TOQtmJbqmNWVuE0tgh0XwzdZsDsUAQ==
— remora.n621.de 2net5wAAAABqEiEgPlfF3V06o0Y+fHM+J5J9s27wgxxcOVSpZ/2g/KSiXCg9DEZI+aVCIobWX9sXTynk5XeU/zZ0WBxtqB0DrAWfBw==
— witness.stagemole.eu Z/euoAAAAABqEiEgw0i+7g2ENfDAWHmtRzCfKTHSDwYDJA2NmKeGi9Y8FtEyOUvVr+AJmIY/2TUFucgKi7lI7cUiOvKFYe/TmN9DAg==
`;
/** The log's key, from the same test. */
export const REAL_LOG_VKEY = 'arche2025h1.staging.ct.transparency.dev+ba2f06c0+AU0vHmlGCS/PdN8b2OaGmKprLI8HKM+dJ472xgFYh15f';
/**
 * The witnesses' vkeys as their operators publish them: remora's is also in transparency-dev/formats
 * note/note_cosigv1_test.go (TestCoSigV1NewVerifier); little-garden's at https://transparency.dev/witnesses;
 * stagemole's at https://witness.stagemole.eu/about; smartit's at https://witness1.smartit.nu/witness1/about.txt.
 * test/tlog-policy.test.ts shows each one verifies its line above.
 */
export const REAL_WITNESSES = {
  remora: 'remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2',
  'little-garden': 'transparency.dev/DEV:witness-little-garden+d8042a87+BCtusOxINQNUTN5Oj8HObRkh2yHf/MwYaGX4CPdiVEPM',
  stagemole: 'witness.stagemole.eu+67f7aea0+BEqSG3yu9YrmcM3BHvQYTxwFj3uSWakQepafafpUqklv',
  smartit: 'witness1.smartit.nu/witness1+a48c820f+BPSFWg9G6KPiO7QPryYO5Xq4oYJJ+kAvLKLSimDhoxMO',
};
/** The time every cosignature of REAL_NOTE carries. */
export const REAL_TIMESTAMP = 1779573024;

// From transparency-dev/formats policy/tlog_policy_test.go: a Go note key pair (type 0x01), fit
// for a log, not a witness.
export const WIT1_SKEY = 'PRIVATE+KEY+Wit1+55ee4561+AeadRiG7XM4XiieCHzD8lxysXMwcViy5nYsoXURWGrlE';
export const WIT1_VKEY = 'Wit1+55ee4561+AVhZSmQj9+SoL+p/nN0Hh76xXmF7QcHfytUrI1XfSClk';

/**
 * Go's private key encoding, PRIVATE+KEY+<name>+<hash>+base64(0x01 ‖ seed), read into a
 * KeyObject through the fixed PKCS#8 prefix of an Ed25519 key (RFC 8410), not the module.
 */
export function goPrivateKey(skey: string): { name: string; hash: string; key: KeyObject } {
  const m = /^PRIVATE\+KEY\+([^+]+)\+([0-9a-f]{8})\+(.+)$/.exec(skey);
  assert.ok(m, skey);
  const encoded = Buffer.from(m[3]!, 'base64');
  assert.equal(encoded.length, 33);
  assert.equal(encoded[0], 0x01);
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), encoded.subarray(1)]);
  return { name: m[1]!, hash: m[2]!, key: createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }) };
}

/**
 * An RFC 6962 tree of `entries` with every node kept, as the log's tiles keep them: its root, and
 * the inclusion path of any entry.
 */
export function keptTree(entries: readonly Uint8Array[]): { root: Hash; inclusionPath(index: number): Hash[] } {
  const nodes = new Map<string, Hash>();
  const tree = new TreeBuilder();
  entries.forEach((e, i) => {
    const leaf = leafHash(e);
    nodes.set(`0/${i}`, leaf);
    for (const { key, hash } of tree.append(leaf)) nodes.set(`${key.level}/${key.index}`, hash);
  });
  return { root: tree.root(), inclusionPath: (index) => inclusionProof(index, entries.length, (k) => nodes.get(`${k.level}/${k.index}`)!) };
}
