import { Type } from 'typebox';
import { Email, FreeText, NewPassword, PageQuery, PasswordInput, Role, Text, Timestamp } from '../../http/schemas.js';

export const User = Type.Object({
  id: Type.Integer(),
  email: Type.Optional(Type.String({ description: 'Shown only to the user themself and to ADMINs' })),
  name: Type.String(),
  role: Role,
  active: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const UserName = Text(100);

export const CreateUserBody = Type.Object(
  { email: Email, name: UserName, password: NewPassword, role: Type.Optional(Role) },
  { additionalProperties: false },
);

export const UpdateUserBody = Type.Object(
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
);

export const RoleBody = Type.Object({ role: Role }, { additionalProperties: false });
export const ActiveBody = Type.Object({ active: Type.Boolean() }, { additionalProperties: false });
export const ProfileBody = Type.Object({ name: UserName }, { additionalProperties: false });

export const UserListQuery = Type.Object(
  {
    role: Type.Optional(Role),
    active: Type.Optional(Type.Boolean()),
    q: Type.Optional(FreeText(100, { description: 'Matches names (and, for ADMINs, emails), case-insensitive' })),
    ...PageQuery,
  },
  { additionalProperties: false },
);
