// The audit log's background work on this instance: the sealer, the checkpointer (on PostgreSQL
// in a worker thread of their own, sealing.thread.ts) and, with
// AUDIT_WEBHOOK_URL set, the webhook that streams sealed records and checkpoints out; started
// once the app is ready and stopped before the database closes. Every instance runs them; the
// sealer's advisory lock and the webhook's lease make one instance do each at a time
// (AUDIT_SEALING=off leaves an instance out of all of them). With AUDIT_WITNESS_POLICY, the
// witness submitter asks the policy's witnesses to cosign new checkpoints, one instance at a time
// (its lease).
import type { FastifyInstance } from 'fastify';
import { ConfigError } from '../config.js';
import type { Deps } from '../deps.js';
import { auditWebhookMetrics, auditWitnessMetrics } from './metrics.js';
import type { EvidenceService } from '../modules/audit/evidence/evidence.service.js';
import { createSealing } from '../modules/audit/evidence/evidence.sealer.js';
import { sealingInThread, type SealingControl } from '../modules/audit/evidence/sealing.thread.js';
import { createAuditWebhook, receiverOf, type AuditWebhook } from '../modules/audit/evidence/webhook.sender.js';
import { webhookLag } from '../modules/audit/evidence/webhook.repository.js';
import { requirePolicyNamesLog, WitnessSubmitter } from '../modules/audit/evidence/witness.submitter.js';

export function attachAuditWorkers(app: FastifyInstance, deps: Deps, evidence: EvidenceService, onSealed?: () => void): void {
  // The scans' worker threads (scan.pool.ts) end before the database closes.
  app.addHook('onClose', async () => evidence.closeScans());
  // The log's identity is settled at start on every instance, so that one holding a key the log
  // does not trust (log.identity.ts) refuses to start instead of answering verifications wrongly.
  const policy = deps.config.auditWitnessPolicy?.policy;
  const countSubmission = policy ? auditWitnessMetrics(app.metricsRegistry, () => evidence.witnessing.lag()) : undefined;
  if (!deps.config.auditSealing) {
    app.addHook('onReady', async () => {
      const identity = await evidence.logIdentity();
      if (policy) requirePolicyNamesLog(policy, identity);
    });
    return;
  }
  const { auditWebhookUrl: url, auditWebhookSecret: secret, auditWebhookFormat: format } = deps.config;
  // Unsigned deliveries would let anyone who can reach the receiver feed it a forged log.
  if (url && !secret) throw new ConfigError('AUDIT_WEBHOOK_URL is set but AUDIT_WEBHOOK_SECRET is not: deliveries are signed with it');
  let webhook: AuditWebhook | undefined;
  if (url && secret) {
    const receiver = receiverOf(url);
    const failures = auditWebhookMetrics(app.metricsRegistry, () => webhookLag(deps.db, receiver));
    webhook = createAuditWebhook({ db: deps.db, url, secret, format, log: deps.log, tuning: { ...deps.testHooks?.webhookTuning }, onFailure: (reason) => failures.inc({ reason }) });
  }
  let stop: (() => Promise<void>) | undefined;
  app.addHook('onReady', async () => {
    const identity = await evidence.logIdentity();
    if (policy) requirePolicyNamesLog(policy, identity);
    const witnesses = policy
      ? new WitnessSubmitter({
          db: deps.db,
          policy,
          identity,
          intervalMs: deps.config.auditWitnessIntervalMs,
          log: deps.log,
          consistencyProof: async (from, to) => (await evidence.consistencyProof(from, to)).proof,
          onOutcome: (witness, outcome) => countSubmission?.inc({ witness, outcome }),
        })
      : undefined;
    const sealingOptions = {
      identity,
      checkpointIntervalMs: deps.config.auditCheckpointIntervalMs,
      log: deps.log,
      onSealed: () => {
        onSealed?.();
        webhook?.wake();
        witnesses?.wake();
      },
    };
    // On PostgreSQL in a thread of its own, off the requests' event loop (sealing.thread.ts).
    const access = deps.db.threadAccess;
    const sealing: SealingControl = access ? sealingInThread({ ...sealingOptions, access }) : createSealing({ ...sealingOptions, db: deps.db });
    const unsubscribe = deps.commits.onCommitted((c) => {
      if (c.audited) sealing.wake();
    });
    sealing.start();
    webhook?.start();
    witnesses?.start();
    stop = async () => {
      unsubscribe();
      await Promise.all([sealing.stop(), webhook?.stop(), witnesses?.stop()]);
    };
  });
  app.addHook('preClose', async () => {
    await stop?.();
  });
}
