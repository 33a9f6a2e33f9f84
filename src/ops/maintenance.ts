// Housekeeping that every instance may run (the deletes are idempotent): the outbox and
// idempotency keys are kept 24 hours, counted login failures only as long as they count.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.js';

const EVERY_MS = 10 * 60 * 1000;

export async function runMaintenance(db: Database): Promise<void> {
  await db.query(`DELETE FROM events WHERE created_at < now() - interval '24 hours'`);
  await db.query(`DELETE FROM idempotency_keys WHERE created_at < now() - interval '24 hours'`);
  await db.query(`DELETE FROM login_failures WHERE created_at < now() - interval '15 minutes'`);
  await db.query(`DELETE FROM sessions WHERE expires_at < now() - interval '30 days'`);
}

export function scheduleMaintenance(db: Database, log: FastifyBaseLogger): () => void {
  const timer = setInterval(() => {
    runMaintenance(db).catch((err) => log.warn({ err }, 'maintenance failed; will retry'));
  }, EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
