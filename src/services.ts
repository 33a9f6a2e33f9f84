// Builds the service layer once from its dependencies. Routes, the CLI and (later) socket
// handlers all call these same functions.
import type { Deps } from './deps.js';
import { createAuthService } from './modules/auth/auth.service.js';
import { createMessagesService } from './modules/messages/messages.service.js';
import { createNotificationsService } from './modules/notifications/notifications.service.js';
import { createPostsService } from './modules/posts/posts.service.js';
import { createProjectsService } from './modules/projects/projects.service.js';
import { createTasksService } from './modules/tasks/tasks.service.js';
import { createUsersService } from './modules/users/users.service.js';

export function createServices(deps: Deps) {
  return {
    auth: createAuthService(deps),
    users: createUsersService(deps),
    projects: createProjectsService(deps),
    tasks: createTasksService(deps),
    posts: createPostsService(deps),
    messages: createMessagesService(deps),
    notifications: createNotificationsService(deps),
  };
}

export type Services = ReturnType<typeof createServices>;
