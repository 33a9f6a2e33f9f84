// Messages as the API takes and gives them; POST /messages and the socket's new-message event
// validate with the same body schema.
import { Type } from 'typebox';
import { Id, Text, Timestamp, named } from '../../http/schemas.js';
import { pattern } from '../../validation/patterns.js';
import { ROOM_PATTERN } from './messages.service.js';

export const Room = Type.String({ pattern: pattern(ROOM_PATTERN, 'must be "general" or "project:<id>"'), maxLength: 30, description: '`general` or `project:<id>`' });

export const Message = named(
  'Message',
  Type.Object({ id: Id, room: Room, author_id: Id, text: Text(2000), created_at: Timestamp }),
  { id: 311, room: 'project:12', author_id: 7, text: 'The staging deploy is green; shall we ship at four?', created_at: '2026-11-22T15:41:07.350Z' },
);

export const MessageBody = named(
  'CreateMessageRequest',
  Type.Object({ text: Text(2000), room: Type.Optional(Room) }, { additionalProperties: false }),
  { text: 'The staging deploy is green; shall we ship at four?', room: 'project:12' },
);
