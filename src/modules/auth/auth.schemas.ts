import { Type } from 'typebox';
import { Email, NewPassword, PasswordInput } from '../../http/schemas.js';
import { User } from '../users/users.schemas.js';

export const LoginBody = Type.Object({ email: Email, password: PasswordInput }, { additionalProperties: false });
export const RefreshBody = Type.Object(
  {
    refresh_token: Type.String({
      minLength: 1,
      maxLength: 1024,
      description: 'The refresh token of the last login or refresh. A malformed, unknown or expired one is 401, a spent or revoked one 401 TOKEN_REVOKED.',
    }),
  },
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
