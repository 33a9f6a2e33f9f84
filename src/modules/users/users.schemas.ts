import { Type } from 'typebox';
import { Email, FreeText, Id, NewPassword, PageQuery, PasswordInput, Role, Text, Timestamp, named } from '../../http/schemas.js';

export const UserName = Text(100);

export const User = named(
  'User',
  Type.Object({
    id: Id,
    email: Type.Optional(Type.String({ ...Email, description: 'Shown only to the user themself and to ADMINs' })),
    name: UserName,
    role: Role,
    active: Type.Boolean({ description: 'false: deactivated; cannot log in, and every session was revoked' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  }),
  { id: 7, email: 'ada@example.com', name: 'Ada Lovelace', role: 'USER', active: true, created_at: '2026-11-21T09:30:00.123Z', updated_at: '2026-11-21T09:30:00.123Z' },
);

export const CreateUserBody = named(
  'CreateUserRequest',
  Type.Object({ email: Email, name: UserName, password: NewPassword, role: Type.Optional(Role) }, { additionalProperties: false }),
  { email: 'grace@example.com', name: 'Grace Hopper', password: 'a long passphrase, 10+ characters', role: 'USER' },
);

export const UpdateUserBody = named(
  'UpdateUserRequest',
  Type.Object(
    {
      name: Type.Optional(UserName),
      email: Type.Optional(Email),
      current_password: Type.Optional(PasswordInput),
    },
    {
      additionalProperties: false,
      minProperties: 1,
      description: 'Fields left out keep their value. Changing your own email requires current_password.',
    },
  ),
  { name: 'Ada King', email: 'ada.king@example.com', current_password: 'your current password' },
);

export const RoleBody = named('RoleRequest', Type.Object({ role: Role }, { additionalProperties: false }), { role: 'ADMIN' });
export const ActiveBody = named('ActiveRequest', Type.Object({ active: Type.Boolean() }, { additionalProperties: false }), { active: false });
export const ProfileBody = named('ProfileRequest', Type.Object({ name: UserName }, { additionalProperties: false }), { name: 'Ada King' });

export const UserListQuery = Type.Object(
  {
    role: Type.Optional(Role),
    active: Type.Optional(Type.Boolean()),
    q: Type.Optional(FreeText(100, { description: 'Matches names (and, for ADMINs, emails), case-insensitive' })),
    ...PageQuery,
  },
  { additionalProperties: false },
);
