import { Type } from 'typebox';
import { Count, FreeText, Id, NullableId, PageQuery, StringEnum, Text, Timestamp, named } from '../../http/schemas.js';

export const ProjectRoleSchema = named('ProjectRole', StringEnum(['OWNER', 'MEMBER'], { description: "A member's role in a project" }), 'MEMBER');

export const Project = named(
  'Project',
  Type.Object({
    id: Id,
    name: Text(200),
    description: FreeText(10000),
    created_by: NullableId({ description: 'The user who created it; null once that user is deleted' }),
    created_at: Timestamp,
    updated_at: Timestamp,
    member_count: Count(),
  }),
  {
    id: 12,
    name: 'Website relaunch',
    description: 'New landing page and docs site, live before the spring campaign.',
    created_by: 7,
    created_at: '2026-11-21T09:30:00.123Z',
    updated_at: '2026-11-22T14:05:12.481Z',
    member_count: 4,
  },
);

export const Member = named(
  'ProjectMember',
  Type.Object({ user_id: Id, role: ProjectRoleSchema, added_at: Timestamp }),
  { user_id: 9, role: 'MEMBER', added_at: '2026-11-21T10:02:44.019Z' },
);

export const CreateProjectBody = named(
  'CreateProjectRequest',
  Type.Object({ name: Text(200), description: Type.Optional(FreeText(10000)) }, { additionalProperties: false }),
  { name: 'Website relaunch', description: 'New landing page and docs site, live before the spring campaign.' },
);
export const UpdateProjectBody = named(
  'UpdateProjectRequest',
  Type.Object(
    { name: Type.Optional(Text(200)), description: Type.Optional(FreeText(10000)) },
    { additionalProperties: false, minProperties: 1, description: 'Fields left out keep their value' },
  ),
  { description: 'New landing page, docs site and blog, live before the spring campaign.' },
);
export const MemberBody = named('ProjectMemberRequest', Type.Object({ role: ProjectRoleSchema }, { additionalProperties: false }), { role: 'MEMBER' });
export const MemberParams = Type.Object({ id: Id, userId: Id }, { additionalProperties: false });
export const ListQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });
