import { Type } from 'typebox';
import { Count, Id, StringEnum, Timestamp, named } from '../../../http/schemas.js';
import { AuditQuery, AuditRecord } from '../audit.schemas.js';

const Base64Hash = Type.String({ maxLength: 44, pattern: '^[A-Za-z0-9+/]{43}=$', description: 'SHA-256, standard base64 (32 bytes)' });
const TreeSize = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, format: 'int64', description: 'A number of sealed records' });
/** A position in the sealed sequence (0-based). */
const Seq = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, format: 'int64' });
/** AUDIT_LOG_ORIGIN's shape (config.ts): no spaces, no "+". */
const Origin = Type.String({ maxLength: 200, pattern: '^[^\\s+]+$', description: 'The log\'s origin: AUDIT_LOG_ORIGIN, or generated once' });
/** AUDIT_SIGNING_KEY_ID's shape (config.ts). */
const KeyId = Type.String({ maxLength: 64, pattern: '^[A-Za-z0-9._:-]+$' });
const HASH_EXAMPLE = 'n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=';

/** A witness's cosignature of a checkpoint (C2SP tlog-cosignature, cosignature/v1), as its line carries it. */
export const Cosignature = named(
  'AuditCosignature',
  Type.Object({
    name: Type.String({ maxLength: 200, pattern: '^[^\\s+]+$', description: 'The name in the witness\'s vkey, as its signature line carries it (the policy\'s label for the witness may differ)' }),
    key_id: Type.String({ maxLength: 8, pattern: '^[0-9a-f]{8}$', description: 'The witness key\'s ID: 8 hex digits, as in its vkey' }),
    time: { ...Timestamp, description: 'The time the cosignature signs (whole seconds), ISO 8601 UTC' },
    signature: Type.String({ maxLength: 88, pattern: '^[A-Za-z0-9+/]{86}==$', description: 'The Ed25519 signature alone (64 bytes), standard base64; the line is `— <name> base64(key ID ‖ 8-byte big-endian time ‖ signature)`' }),
  }),
  { name: 'witness.example/w1', key_id: '3f5e9a07', time: '2026-11-22T08:15:41.000Z', signature: 'N+/2wmAgRgoU+SPve5Z1XX+4T/Gwaw4HqFxZK9/ftK1RGEofQ5sXB6o59kN0LUzsMVIsBF8JaBE3VzDanDY2uQ==' },
);

/** The words of a stall, as verification and /health/ready give them (example). */
const STALL_EXAMPLE = {
  reason: 'sealing_stopped' as const,
  what: 'record 1043 and those after it',
  why: "committed but not sealed (sealing has stopped: record 1043 committed 75 s ago and is not sealed, and nothing was sealed for 80 s (the service's log says why))",
  first_unsealed_id: 1043,
};

/** Something verification could not check, and why: not a failure (log.verifier.ts NotChecked). */
export const NotChecked = named(
  'AuditNotChecked',
  Type.Object(
    {
      reason: StringEnum(['sealing_stopped'], {
        description:
          'Why, as a code. `sealing_stopped`: these records committed but were not sealed, and no seal was made for longer than AUDIT_SEAL_STALL_MS, ' +
          'so there is nothing to check them against yet; `/health/ready` answers `degraded` meanwhile. More reasons may be added: treat one you do not know as not checked, never as failed',
      }),
      what: Type.String({ maxLength: 200, description: 'What was not checked, in words: `record 1043 and those after it`' }),
      why: Type.String({ maxLength: 2000, description: 'Why, in words: for `sealing_stopped`, how long the first record has waited and since when nothing was sealed' }),
      first_unsealed_id: Type.Optional({ ...Id, description: '`sealing_stopped`: the first committed record still waiting for its seal; it and those after it were not checked' }),
    },
    { description: 'A check that could not be made, and why. Nothing in it was found wrong: it is not a failure' },
  ),
  STALL_EXAMPLE,
);

export const VerifyReport = named(
  'AuditVerifyReport',
  Type.Object({
    ok: Type.Boolean({
      description:
        'Integrity: true when nothing that was checked was found wrong; false when something was (`problem` says what). What could not be checked ' +
        '(`not_checked`) never makes it false: alert on `ok: false` for tampering, and on `not_checked` (or `/health/ready` answering `degraded`) for sealing that stopped',
    }),
    records_checked: Count(),
    checkpoints_checked: Count(),
    head: Type.Unsafe<{ seq: number; tree_size: number; root_hash: string } | null>({
      type: ['object', 'null'],
      properties: { seq: Seq, tree_size: TreeSize, root_hash: Base64Hash },
      required: ['seq', 'tree_size', 'root_hash'],
      description: 'The tree rebuilt from the records: its last seq, size and root (null when nothing is sealed yet)',
    }),
    personal_values_checked: Type.Unsafe<number | null>({
      type: ['integer', 'null'],
      format: 'int64',
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description:
        'Personal values (side table) checked against the keyed refs their sealed records commit to; values erased by `teamlog audit redact` have nothing to check. ' +
        'null when verification had no key to check them with',
    }),
    first_bad_id: Type.Optional({ ...Id, description: 'The first record found changed, inserted, sealed twice, or (for a removed one) the first surviving record after the gap' }),
    first_bad_tile: Type.Optional(Type.String({ maxLength: 80, description: 'The first stored tile (tlog-tiles path) that is not the tile the records make: the stored tree was changed' })),
    first_unsealed_id: Type.Optional({
      ...Id,
      description:
        'Sealing has stopped: the first committed record still waiting for its seal, the one `/health/ready` names. It and those after it were not checked ' +
        '(the `not_checked` entry with reason `sealing_stopped` says why). With `ok: true` when nothing checked was found wrong (an answer that was `ok: false`, ' +
        'with the stall in `problem`, before `not_checked` was added), with `ok: false` beside a real problem',
    }),
    problem: Type.Optional(Type.String({ maxLength: 2000, description: 'What was found wrong, in words (`ok: false` only). Never what could not be checked: that is `not_checked`' })),
    not_checked: Type.Optional(
      Type.Array(NotChecked, {
        maxItems: 10,
        description: 'What could not be checked, and why; absent when everything was. Said beside `ok: true`, or beside the problem of an `ok: false`',
      }),
    ),
  }),
  {
    ok: true, records_checked: 1042, checkpoints_checked: 37, head: { seq: 1041, tree_size: 1042, root_hash: HASH_EXAMPLE }, personal_values_checked: 12,
    first_unsealed_id: 1043, not_checked: [STALL_EXAMPLE],
  },
);

export const CheckpointJson = named(
  'AuditCheckpoint',
  Type.Object({
    origin: Origin,
    tree_size: TreeSize,
    root_hash: Base64Hash,
    prev_checkpoint_hash: Type.Unsafe<string | null>({
      type: ['string', 'null'],
      maxLength: 44,
      pattern: '^[A-Za-z0-9+/]{43}=$',
      description: 'Standard base64 SHA-256 of the previous checkpoint\'s whole note; null for the first',
    }),
    key_id: KeyId,
    signature: Type.String({ maxLength: 88, pattern: '^[A-Za-z0-9+/]{86}==$', description: 'The Ed25519 signature in the note, standard base64' }),
    created_at: Timestamp,
    note: Type.String({ maxLength: 16_384, description: 'The C2SP tlog-checkpoint signed note: the log\'s signature line, then the witnesses\' cosignature lines' }),
    cosignatures: Type.Array(Cosignature, { maxItems: 99, description: 'The witnesses\' cosignatures kept for this checkpoint that verify under the witness policy (as kept, without one), in the note\'s order' }),
    witnessed: Type.Boolean({ description: 'The cosignatures meet the witness policy\'s quorum (AUDIT_WITNESS_POLICY); false without a policy' }),
  }),
  {
    origin: 'teamlog.example.com/audit',
    tree_size: 1042,
    root_hash: HASH_EXAMPLE,
    prev_checkpoint_hash: 'Vd3sM2Yk5dVw1Xb8o0b0V9QmUuJt0n8rQ6bq0X0zS1A=',
    key_id: 'audit-2026',
    signature: 'HNIkWUjFa7ErBjXYTtUukrTfKHYaFjSCIv/7v1Ywd+VPAFH58tUvtse/psjLETLTT36GKB0j+GtHZ4cIyKO0sA==',
    created_at: '2026-11-22T08:15:35.000Z',
    note:
      'teamlog.example.com/audit\n1042\nn4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=\ntime 2026-11-22T08:15:35.000Z\n' +
      'prev Vd3sM2Yk5dVw1Xb8o0b0V9QmUuJt0n8rQ6bq0X0zS1A=\n\n— teamlog.example.com/audit obLD1BzSJFlIxWuxKwY12E7VLpK03yh2GhY0giL/+79WMHflTwBR+fLVL7bHv6bIyxEy0083higdI/hrR2eHCMijtLA=\n',
    cosignatures: [],
    witnessed: false,
  },
);

export const PublicKey = named(
  'AuditPublicKey',
  Type.Object({
    key_id: KeyId,
    algorithm: Type.Literal('Ed25519'),
    public_key: Type.String({ maxLength: 200, pattern: '^-----BEGIN PUBLIC KEY-----', description: 'SPKI PEM' }),
    note_verifier_key: Type.String({
      maxLength: 300,
      pattern: '^[^\\s+]+\\+[0-9a-f]{8}\\+[A-Za-z0-9+/]+=*$',
      description: 'C2SP signed-note verifier key: <name>+<key hash>+<base64 key>',
    }),
    created_at: Timestamp,
  }),
  {
    key_id: 'audit-2026',
    algorithm: 'Ed25519',
    public_key: '-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n',
    note_verifier_key: 'teamlog.example.com/audit+a1b2c3d4+ARm/RAlphM3+hUG6wWfcO5bIUIaqMLa2ywxcOK1wMWbh',
    created_at: '2026-11-01T12:00:00.000Z',
  },
);

export const ProofQuery = Type.Object(
  {
    tree_size: Type.Optional(TreeSize),
    format: Type.Optional(StringEnum(['json', 'tlog-proof'], {
      description: 'json (default): the proof as JSON; tlog-proof: a C2SP tlog-proof (c2sp.org/tlog-proof@v1), text/plain, with the cosigned checkpoint',
    })),
  },
  { additionalProperties: false },
);

/** The record as it was sealed (docs/api.md 5.4): its API fields, personal values as their refs. */
export const SealedAuditRecord = named(
  'SealedAuditRecord',
  Type.Object(
    {
      ...AuditRecord.properties,
      metadata: Type.Object({}, { additionalProperties: true, description: 'As sealed: each personal value (emails) as {"$personal": "<keyed hash>"}, never the value' }),
    },
    { description: 'The record as it was sealed; its leaf is SHA-256(0x00 ‖ RFC 8785 canonical JSON of this object)' },
  ),
  {
    id: 1042, actor_id: 1, action: 'LOGIN_FAILURE', resource_type: 'USER', resource_id: 7, timestamp: '2026-11-22T08:15:30.512Z', result: 'FAILURE',
    metadata: { email: { $personal: '3q2+7w' }, reason: 'bad_password' }, ip: '203.0.113.24', user_agent: 'curl/8.5.0', request_id: '0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90',
  },
);

export const InclusionProof = named(
  'AuditInclusionProof',
  Type.Object({
    id: Id,
    seq: Seq,
    tree_size: TreeSize,
    leaf_hash: Base64Hash,
    audit_path: Type.Array(Base64Hash, { maxItems: 64, description: 'RFC 6962 PATH(seq, D[tree_size]), leaf side first' }),
    sealed: SealedAuditRecord,
  }),
  {
    id: 1042, seq: 1041, tree_size: 1042, leaf_hash: HASH_EXAMPLE, audit_path: ['Vd3sM2Yk5dVw1Xb8o0b0V9QmUuJt0n8rQ6bq0X0zS1A=', 'tq1GQ5dpFjrQ8y2kmV0bHk8pC2sJw9vXoR4c3nZ7aEk='],
    sealed: {
      id: 1042, actor_id: 1, action: 'CHANGE_USER_ROLE', resource_type: 'USER', resource_id: 7, timestamp: '2026-11-22T08:15:30.512Z', result: 'SUCCESS',
      metadata: { oldRole: 'USER', newRole: 'ADMIN' }, ip: '203.0.113.24', user_agent: 'curl/8.5.0', request_id: '0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90',
    },
  },
);

/** `tile/<L>/<N>[.p/<W>]` or `tile/entries/<N>[.p/<W>]` after `tile/` (tiles.ts parses it). */
export const TilePathParams = Type.Object({ '*': Type.String({ maxLength: 64, description: 'The tile\'s path after tile/: <L>/<N>[.p/<W>] or entries/<N>[.p/<W>]' }) });

export const ConsistencyQuery = Type.Object({ from: TreeSize, to: TreeSize }, { additionalProperties: false });

export const ConsistencyProof = named(
  'AuditConsistencyProof',
  Type.Object({
    from: TreeSize,
    to: TreeSize,
    proof: Type.Array(Base64Hash, { maxItems: 128, description: 'RFC 6962 PROOF(from, D[to])' }),
  }),
  { from: 1000, to: 1042, proof: ['Vd3sM2Yk5dVw1Xb8o0b0V9QmUuJt0n8rQ6bq0X0zS1A=', HASH_EXAMPLE] },
);

const { limit: _limit, cursor: _cursor, ...filters } = AuditQuery.properties;
export const ExportQuery = Type.Object(
  { ...filters, format: Type.Optional(
      StringEnum(['ndjson', 'csv', 'ocsf'], {
        description:
          'ndjson (default): records with their proofs, then the checkpoint; csv: one row per record; ocsf: NDJSON of OCSF 1.8 events ' +
          '(Authentication, Account Change or API Activity by action), each record\'s id, seq, leaf hash, audit path and sealed form under `unmapped`, ' +
          'the checkpoint in the last event\'s `unmapped.checkpoint`',
      }),
    ),
  },
  { additionalProperties: false },
);
