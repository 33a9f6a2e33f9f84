// Chat. `general` is every user's room; `project:<id>` belongs to that project's members
// (and ADMINs). POST /messages and the socket `new-message` event both call postMessage.
import type { Actor, RequestContext } from '../../context.js';
import type { Deps } from '../../deps.js';
import { notFound } from '../../http/errors.js';
import { pageRequest } from '../../http/pagination.js';
import { addEvents } from '../outbox/outbox.js';
import { accessOf, projectPolicy } from '../projects/projects.policy.js';
import { memberRole } from '../projects/projects.repository.js';

type Ctx = RequestContext & { actor: Actor };

export interface MessageRow {
  id: number;
  room: string;
  author_id: number;
  text: string;
  created_at: string;
}

export const ROOM_PATTERN = '^(general|project:[1-9][0-9]{0,15})$';

export function createMessagesService(deps: Deps) {
  const { db } = deps;

  /** The project behind a room, after checking the caller may use it (404 otherwise). */
  async function roomProject(actor: Actor, room: string): Promise<number | null> {
    if (room === 'general') return null;
    const projectId = Number(room.slice('project:'.length));
    if (!Number.isSafeInteger(projectId)) throw notFound('Room');
    const exists = await db.query('SELECT 1 FROM projects WHERE id = $1', [projectId]);
    if (exists.length === 0 || !projectPolicy.useRoom(accessOf(actor, await memberRole(db, projectId, actor.id)))) throw notFound('Room');
    return projectId;
  }

  return {
    async list(actor: Actor, query: { room?: string; limit?: number; cursor?: string }) {
      const room = query.room ?? 'general';
      await roomProject(actor, room);
      const page = pageRequest(query);
      const rows = await db.query<MessageRow>(
        `SELECT id, room, author_id, text, created_at FROM messages
          WHERE room = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`,
        [room, page.beforeId ?? null, page.limit + 1],
      );
      return { rows, page };
    },

    async postMessage(ctx: Ctx, input: { text: string; room?: string }): Promise<MessageRow> {
      const room = input.room ?? 'general';
      const projectId = await roomProject(ctx.actor, room);
      return db.transaction(async (tx) => {
        const rows = await tx.query<MessageRow>(
          `INSERT INTO messages (room, project_id, author_id, text) VALUES ($1, $2, $3, $4)
           RETURNING id, room, author_id, text, created_at`,
          [room, projectId, ctx.actor.id, input.text],
        );
        const message = rows[0]!;
        addEvents(tx, [{ name: 'new-message', room, payload: { ...message } }]);
        return message;
      });
    },
  };
}

export type MessagesService = ReturnType<typeof createMessagesService>;
