// Messages as the API takes and gives them; POST /messages and the socket's new-message event
// validate with the same body schema.
import { Type } from 'typebox';
import { Text, Timestamp, pattern } from '../../http/schemas.js';
import { ROOM_PATTERN } from './messages.service.js';

export const Room = Type.String({ pattern: pattern(ROOM_PATTERN, 'must be "general" or "project:<id>"'), maxLength: 30, description: '`general` or `project:<id>`' });

export const Message = Type.Object({ id: Type.Integer(), room: Type.String(), author_id: Type.Integer(), text: Type.String(), created_at: Timestamp });

export const MessageBody = Type.Object({ text: Text(2000), room: Type.Optional(Room) }, { additionalProperties: false });
