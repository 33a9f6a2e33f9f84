// GET /console: the audit console (docs/api.md section 4, "Audit console"), a page that reads the
// audit routes with the signed-in ADMIN's token. Its source is web/console/; served as every
// built page is (built-pages.ts), and revalidated on every load.
import type { FastifyInstance } from 'fastify';
import { registerBuiltPage } from '../../built-pages.js';

export function registerAuditConsole(app: FastifyInstance): void {
  registerBuiltPage(app, { path: '/console', dir: 'console', cacheControl: 'no-cache', title: 'The audit console', fileTitle: 'Console file' });
}
