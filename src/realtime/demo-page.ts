// GET /realtime-demo: one page a person can use to try real-time (docs/realtime.md): log in,
// watch the messages, notifications and presence arrive, send a message and see its
// acknowledgement, disconnect and reconnect (replay from the last event_id), log out. Its
// source is web/demo/ (TypeScript on @teamlog/client); served as every built page is
// (built-pages.ts), and never stored: a demo's page is always fetched anew.
import type { FastifyInstance } from 'fastify';
import { registerBuiltPage } from '../built-pages.js';

export function registerRealtimeDemo(app: FastifyInstance): void {
  registerBuiltPage(app, { path: '/realtime-demo', dir: 'demo', cacheControl: 'no-store', title: 'The real-time demo', fileTitle: 'Demo file' });
}
