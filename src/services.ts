// Builds the service layer once from its dependencies. Routes, the CLI and (later) socket
// handlers all call these same functions.
import type { Deps } from './deps.js';
import { createAuthService } from './modules/auth/auth.service.js';
import { createUsersService } from './modules/users/users.service.js';

export function createServices(deps: Deps) {
  return {
    auth: createAuthService(deps),
    users: createUsersService(deps),
  };
}

export type Services = ReturnType<typeof createServices>;
