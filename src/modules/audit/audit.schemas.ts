import { Type } from 'typebox';
import { Id, NullableInteger, NullableString, PageQuery, Timestamp } from '../../http/schemas.js';
import { AUDIT_ACTIONS, AUDIT_RESULTS, RESOURCE_TYPES } from './audit.writer.js';

const literalUnion = (values: readonly string[]) => Type.Union(values.map((v) => Type.Literal(v)));

export const AuditRecord = Type.Object({
  id: Type.Integer(),
  actor_id: NullableInteger(),
  action: Type.String(),
  resource_type: Type.String(),
  resource_id: NullableInteger(),
  timestamp: Timestamp,
  result: Type.String(),
  metadata: Type.Object({}, { additionalProperties: true, description: 'Context; camelCase keys. Personal data shows as "[redacted]" once erased.' }),
  ip: NullableString(),
  user_agent: NullableString(),
  request_id: Type.String(),
});

export const AuditQuery = Type.Object(
  {
    actor_id: Type.Optional(Id),
    action: Type.Optional(Type.Array(literalUnion(AUDIT_ACTIONS), { maxItems: 25, description: 'Repeatable: ?action=A&action=B' })),
    resource_type: Type.Optional(literalUnion(RESOURCE_TYPES)),
    resource_id: Type.Optional(Id),
    result: Type.Optional(literalUnion(AUDIT_RESULTS)),
    from: Type.Optional(Type.String({ format: 'date-time', description: 'Inclusive lower bound on timestamp' })),
    to: Type.Optional(Type.String({ format: 'date-time', description: 'Exclusive upper bound on timestamp' })),
    ...PageQuery,
  },
  { additionalProperties: false },
);
