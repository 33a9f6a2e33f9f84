// Chat. `general` is every user's room; `project:<id>` belongs to that project's members
// (and ADMINs). POST /messages and the socket `new-message` event both call postMessage.
import type { Actor, ActorContext } from '../../context.js';
import type { Deps } from '../../deps.js';
import { authorize } from '../../domain/authorization.js';
import { notFound } from '../../domain/errors.js';
import { pageOf, type PageRequest } from '../../domain/page.js';
import { useCase } from '../../use-cases/runner.js';
import { lockProjectAccess } from '../projects/projects.access.js';
import { accessOf, projectPolicy } from '../projects/projects.policy.js';
import { projectAndRole } from '../projects/projects.repository.js';
import { presentMessage } from './messages.presenter.js';
import * as repo from './messages.repository.js';
import type { MessageRow } from './messages.repository.js';

const POST = useCase('messages.post', [], { batch: true });

export const ROOM_PATTERN = '^(general|project:[1-9][0-9]{0,15})$';

/** The project behind a room (null for `general`); 404 for a room that cannot exist. */
function projectOfRoom(room: string): number | null {
  if (room === 'general') return null;
  const projectId = Number(room.slice('project:'.length));
  if (!room.startsWith('project:') || !Number.isSafeInteger(projectId) || projectId < 1) throw notFound('Room');
  return projectId;
}

export function createMessagesService(deps: Deps) {
  const { db, run } = deps;

  return {
    async list(viewer: Actor, room: string, page: PageRequest) {
      const projectId = projectOfRoom(room);
      if (projectId !== null) {
        const { exists, role } = await projectAndRole(db, projectId, viewer.id);
        if (!exists) throw notFound('Room');
        authorize(projectPolicy.can('useRoom', accessOf(viewer, role)), 'Room');
      }
      return pageOf(await repo.listMessages(db, room, page.after, page.limit), page);
    },

    postMessage(ctx: ActorContext, input: { text: string; room?: string }): Promise<MessageRow> {
      const room = input.room ?? 'general';
      const projectId = projectOfRoom(room);
      return run(ctx, POST, async (uow) => {
        if (projectId !== null) {
          // The caller's membership is locked: a removal waits for the message, or is seen here.
          const { projectId: found, access } = await lockProjectAccess(uow, { projectId });
          if (found === undefined) throw notFound('Room');
          uow.authorize(projectPolicy.can('useRoom', access), 'Room');
        }
        const message = await repo.insertMessage(uow.tx, { room, projectId, authorId: ctx.actor.id, text: input.text });
        uow.emit({ name: 'new-message', room, payload: presentMessage(message) });
        return message;
      });
    },
  };
}

export type MessagesService = ReturnType<typeof createMessagesService>;
