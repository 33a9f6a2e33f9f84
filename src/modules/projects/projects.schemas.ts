import { Type } from 'typebox';
import { FreeText, Id, NullableInteger, PageQuery, StringEnum, Text, Timestamp } from '../../http/schemas.js';

export const ProjectRoleSchema = StringEnum(['OWNER', 'MEMBER']);

export const Project = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  description: Type.String(),
  created_by: NullableInteger(),
  created_at: Timestamp,
  updated_at: Timestamp,
  member_count: Type.Integer(),
});

export const Member = Type.Object({ user_id: Type.Integer(), role: ProjectRoleSchema, added_at: Timestamp });

export const CreateProjectBody = Type.Object({ name: Text(200), description: Type.Optional(FreeText(10000)) }, { additionalProperties: false });
export const UpdateProjectBody = Type.Object(
  { name: Type.Optional(Text(200)), description: Type.Optional(FreeText(10000)) },
  { additionalProperties: false, minProperties: 1, description: 'Fields left out keep their value' },
);
export const MemberBody = Type.Object({ role: ProjectRoleSchema }, { additionalProperties: false });
export const MemberParams = Type.Object({ id: Id, userId: Id }, { additionalProperties: false });
export const ListQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });
