import { Type } from 'typebox';
import { NullableString, named } from '../../../http/schemas.js';

const MAX_INT = Number.MAX_SAFE_INTEGER;

export const WitnessesStatus = named(
  'AuditWitnesses',
  Type.Object({
    policy: NullableString(1_048_576, { description: 'The witness policy in force (AUDIT_WITNESS_POLICY), a C2SP tlog-policy file, as written; null when none is configured (the log asks no witness, and the rest is empty)' }),
    quorum_met: Type.Boolean({ description: 'The witnesses whose last submission was cosigned meet the policy\'s quorum' }),
    newest_witnessed: Type.Unsafe<{ tree_size: number; created_at: string } | null>({
      type: ['object', 'null'],
      properties: {
        tree_size: { type: 'integer', minimum: 1, maximum: MAX_INT, format: 'int64' },
        created_at: { type: 'string', format: 'date-time', maxLength: 24 },
      },
      required: ['tree_size', 'created_at'],
      description: 'The newest checkpoint whose cosignatures meet the quorum (null until one does)',
    }),
    witnesses: Type.Array(
      Type.Object({
        name: Type.String({ maxLength: 200, description: 'The witness\'s name' }),
        vkey: Type.String({ maxLength: 300, description: 'Its verifier key: <name>+<hex key ID>+<base64(0x04 ‖ Ed25519 key)>' }),
        url: NullableString(2000, { description: 'Where checkpoints are submitted (POST <url>/add-checkpoint); null: the policy gives none' }),
        last_cosigned_size: Type.Unsafe<number | null>({ type: ['integer', 'null'], minimum: 1, maximum: MAX_INT, format: 'int64', description: 'The largest tree size it cosigned' }),
        last_cosigned_at: NullableString(24, { format: 'date-time', description: 'When its last cosignature came' }),
        last_error: NullableString(1000, { description: 'Why its last submission was not cosigned (an HTTP status and the witness\'s answer, a timeout, a network error, an invalid cosignature); null once one is' }),
      }),
      { maxItems: 1000 },
    ),
  }),
  {
    policy: 'witness w1 w1.example+3f5e9a07+BNcf… https://w1.example\nwitness w2 w2.example+71aa01c2+BMx2… https://w2.example\ngroup both 2 w1 w2\nquorum both\n',
    quorum_met: false,
    newest_witnessed: { tree_size: 1042, created_at: '2026-11-22T08:15:35.000Z' },
    witnesses: [
      { name: 'w1', vkey: 'w1.example+3f5e9a07+BNcf…', url: 'https://w1.example', last_cosigned_size: 1042, last_cosigned_at: '2026-11-22T08:15:41.000Z', last_error: null },
      { name: 'w2', vkey: 'w2.example+71aa01c2+BMx2…', url: 'https://w2.example', last_cosigned_size: 980, last_cosigned_at: '2026-11-22T08:05:02.000Z', last_error: 'no answer within 10000 ms' },
    ],
  },
);
