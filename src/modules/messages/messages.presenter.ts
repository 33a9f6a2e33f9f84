// What a message looks like from the outside (the API and the `new-message` event).
import type { MessageRow } from './messages.repository.js';

export const presentMessage = (m: MessageRow) => ({ id: m.id, room: m.room, author_id: m.author_id, text: m.text, created_at: m.created_at });
