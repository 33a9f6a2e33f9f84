import { Type, type Static } from 'typebox';
import { Email, NewPassword, PasswordInput, exampleOf, named } from '../../http/schemas.js';
import { User } from '../users/users.schemas.js';

export const LoginBody = named(
  'LoginRequest',
  Type.Object({ email: Email, password: PasswordInput }, { additionalProperties: false }),
  { email: 'ada@example.com', password: 'correct horse battery staple' },
);

export const RefreshBody = named(
  'RefreshRequest',
  Type.Object(
    {
      refresh_token: Type.String({
        minLength: 1,
        maxLength: 1024,
        description: 'The refresh token of the last login or refresh. A malformed, unknown or expired one is 401, a spent or revoked one 401 TOKEN_REVOKED.',
      }),
    },
    { additionalProperties: false },
  ),
  { refresh_token: 'tlr_Q2hhbmdlIG1lOiB0aGlzIGlzIGFuIGV4YW1wbGUgdG9' },
);

export const PasswordBody = named(
  'PasswordChangeRequest',
  Type.Object({ current_password: PasswordInput, new_password: NewPassword }, { additionalProperties: false }),
  { current_password: 'correct horse battery staple', new_password: 'a new and longer passphrase' },
);

const tokenPair = {
  access_token: Type.String({
    maxLength: 4096,
    pattern: '^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$',
    description: 'A signed JWT (HS256): send it as `Authorization: Bearer <access_token>`',
  }),
  refresh_token: Type.String({ maxLength: 47, pattern: '^tlr_[A-Za-z0-9_-]{43}$', description: 'Opaque; exchange it once at POST /auth/refresh' }),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer({ minimum: 1, maximum: 86_400, format: 'int32', description: 'Seconds until the access token expires (ACCESS_TOKEN_TTL)' }),
};

const tokenPairExample = {
  access_token:
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzaWQiOjQyLCJqdGkiOiJiMWQ0ZjVlMiIsInN1YiI6IjciLCJpc3MiOiJ0ZWFtbG9nIiwiYXVkIjoidGVhbWxvZy1hcGkiLCJpYXQiOjE3OTU3NzkwMDAsImV4cCI6MTc5NTc3OTkwMH0.c2lnbmF0dXJlLW9mLXRoZS1leGFtcGxlLXRva2VuMDAw',
  refresh_token: 'tlr_Q2hhbmdlIG1lOiB0aGlzIGlzIGFuIGV4YW1wbGUgdG9',
  token_type: 'Bearer' as const,
  expires_in: 900,
};

export const TokenPairSchema = named('TokenPair', Type.Object(tokenPair), tokenPairExample);

export const LoginResponse = named('LoginResponse', Type.Object({ ...tokenPair, user: User }), {
  ...tokenPairExample,
  user: exampleOf(User) as Static<typeof User>,
});
