// The worker thread of the sealer and the checkpointer on PostgreSQL (sealing.thread.ts): the
// same loops as on the main thread (evidence.sealer.ts), over connections of its own.
import { parentPort, workerData } from 'node:worker_threads';
import type { FastifyBaseLogger } from 'fastify';
import { pino } from 'pino';
import { createPostgresDatabase } from '../../../db/postgres.js';
import { WakeLatch } from '../../../process/wake-latch.js';
import { asBuffer, errorToWire, type WireError } from '../../../db/thread-queries.js';
import { createSealing } from './evidence.sealer.js';
import type { LogIdentity } from './log.identity.js';
import type { FromSealingWorker, SealingWorkerData, ToSealingWorker } from './sealing.thread.js';

const port = parentPort!;
const post = (m: FromSealingWorker) => port.postMessage(m);
const data = workerData as SealingWorkerData;

type Level = Extract<FromSealingWorker, { type: 'log' }>['level'];
const LEVELS: Level[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'];

/**
 * A logger whose lines the main thread writes through its own (its level, redaction and
 * destination); an Error among a line's fields crosses as its message, name, stack and fields.
 */
function forwardingLogger(level: string): FastifyBaseLogger {
  const threshold = pino.levels.values[level] ?? pino.levels.values.info!;
  const logger: Record<string, unknown> = { level, silent: () => {}, child: () => logger };
  for (const name of LEVELS) {
    logger[name] = (first: unknown, second?: unknown) => {
      if (pino.levels.values[name]! < threshold) return;
      const hasFields = typeof first === 'object' && first !== null;
      const fields: Record<string, unknown> = {};
      const errors: Record<string, WireError> = {};
      if (hasFields) {
        for (const [key, value] of Object.entries(first)) {
          if (value instanceof Error) errors[key] = errorToWire(value);
          else fields[key] = value;
        }
      }
      post({ type: 'log', level: name, fields, errors, msg: String((hasFields ? second : first) ?? '') });
    };
  }
  return logger as unknown as FastifyBaseLogger;
}

/** Buffers cross threads as plain Uint8Arrays: the identity's hashes and keys become Buffers again. */
function identityOf(wire: LogIdentity): LogIdentity {
  return {
    ...wire,
    signer: { ...wire.signer, keyHash: asBuffer(wire.signer.keyHash), publicKeyRaw: asBuffer(wire.signer.publicKeyRaw) },
    trusted: wire.trusted.map((v) => ({ ...v, keyHash: asBuffer(v.keyHash) })),
  };
}

const log = forwardingLogger(data.logLevel);
const latch = new WakeLatch(data.wakeLatch);
/**
 * The sealer's rounds are serialized with the checkpointer's: two connections are plenty, and a
 * statement that finds both busy waits for one rather than failing its round after 3 s.
 */
const db = createPostgresDatabase({
  ...data.access, poolSize: 2, perCallPoolSize: 2, applicationName: 'teamlog-audit-sealer', waitForConnections: true,
  onError: (err) => log.warn({ err }, 'audit sealer: a database connection failed'),
});
const sealing = createSealing({
  db,
  identity: identityOf(data.identity),
  checkpointIntervalMs: data.checkpointIntervalMs,
  log,
  onSealed: () => post({ type: 'sealed' }),
  beforeRound: () => latch.lower(),
});

port.on('message', (m: ToSealingWorker) => {
  switch (m.type) {
    case 'start':
      sealing.start();
      break;
    case 'wake':
      sealing.wake();
      break;
    case 'stop':
      void sealing
        .stop()
        .then(() => db.close())
        .finally(() => post({ type: 'stopped' }));
      break;
  }
});
