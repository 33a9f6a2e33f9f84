// Builds the service layer once from its dependencies, and wires the steps modules contribute
// to each other's use cases, so that no module imports one that imports it back. Routes, the
// CLI and (later) socket handlers all call these same functions.
import type { Deps } from './deps.js';
import { createAuditService } from './modules/audit/audit.service.js';
import { createEvidenceService } from './modules/audit/evidence/evidence.service.js';
import { createRedactionService } from './modules/audit/redaction.service.js';
import { createAuthService } from './modules/auth/auth.service.js';
import { createMessagesService } from './modules/messages/messages.service.js';
import { createNotificationsService } from './modules/notifications/notifications.service.js';
import { createPostsService } from './modules/posts/posts.service.js';
import { createProjectsService } from './modules/projects/projects.service.js';
import { refuseSoleOwner } from './modules/projects/projects.user-deletion.js';
import { createTasksService, unassignOnMemberRemoval, unassignOnUserDeletion } from './modules/tasks/tasks.service.js';
import { createUsersService } from './modules/users/users.service.js';

export function createServices(deps: Deps) {
  return {
    auth: createAuthService(deps),
    // Refusals first (a project's only OWNER cannot be deleted), then clean-ups.
    users: createUsersService(deps, { deletionSteps: [refuseSoleOwner, unassignOnUserDeletion] }),
    projects: createProjectsService(deps, { memberRemovalSteps: [unassignOnMemberRemoval] }),
    tasks: createTasksService(deps),
    posts: createPostsService(deps),
    messages: createMessagesService(deps),
    notifications: createNotificationsService(deps),
    audit: createAuditService(deps),
    evidence: createEvidenceService(deps.db, deps.signingKey, {
      origin: deps.config.auditLogOrigin,
      previousVerifierKeys: deps.config.auditPreviousVerifierKeys,
      personalDataKeys: deps.secrets.personalDataKeys,
      sealStallMs: deps.config.auditSealStallMs,
      // The API's verifications and exports: off the main thread, at a low priority (scan.pool.ts).
      scanThreads: deps.config.maxConcurrentAuditScans,
      onScanWarning: (err) => deps.log.warn({ err }, 'an audit scan worker thread\'s database connection failed'),
      ...(deps.config.auditWitnessPolicy ? { witnessPolicy: deps.config.auditWitnessPolicy } : {}),
    }),
    redaction: createRedactionService(deps),
  };
}

export type Services = ReturnType<typeof createServices>;
