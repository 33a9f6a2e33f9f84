import { Type } from 'typebox';
import { Email, NewPassword, PasswordInput } from '../../http/schemas.js';
import { User } from '../users/users.schemas.js';

export const LoginBody = Type.Object({ email: Email, password: PasswordInput }, { additionalProperties: false });
export const RefreshBody = Type.Object(
  { refresh_token: Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_-]+$' }) },
  { additionalProperties: false },
);
export const PasswordBody = Type.Object(
  { current_password: PasswordInput, new_password: NewPassword },
  { additionalProperties: false },
);

export const TokenPairSchema = Type.Object({
  access_token: Type.String(),
  refresh_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer({ description: 'Seconds until the access token expires' }),
});

export const LoginResponse = Type.Object({ ...TokenPairSchema.properties, user: User });
