// The client's `new-message` event (docs/api.md section 6): stored through the same use case as
// POST /messages, answered by acknowledgement. A socket's event is refused, and the socket
// stays connected, when it is over 16 KiB (PAYLOAD_TOO_LARGE), malformed or over 2000
// characters (VALIDATION_FAILED, with the same messages as the API), or beyond 20 a second
// per user, across all their sockets and POST /messages (RATE_LIMITED: the messages service
// it is given counts them, modules/messages/messages.limit.ts). Nothing a client sends can
// throw out of the handler.
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { ActorContext } from '../context.js';
import { DomainError } from '../domain/errors.js';
import { presentMessage } from '../modules/messages/messages.presenter.js';
import { MessageBody } from '../modules/messages/messages.schemas.js';
import type { MessagesService } from '../modules/messages/messages.service.js';
import { describeIssue, type AjvIssue } from '../validation/issues.js';
import { createValidators } from '../validation/validators.js';
import { errorAck, type Ack } from './acks.js';
import type { RealtimeSocket } from './sockets.js';

export const MAX_MESSAGE_BYTES = 16 * 1024;

// Validated as POST /messages validates its body: the same schema, the same messages.
const validateBody = createValidators()(MessageBody, 'body') as ((data: unknown) => boolean) & { errors?: AjvIssue[] | null };

/** The refusal an event gets before it reaches the use case, if any. */
function refusal(input: unknown): DomainError | undefined {
  let size: number;
  try {
    size = Buffer.byteLength(JSON.stringify(input) ?? '');
  } catch {
    size = Infinity; // nested too deep to encode: more than any message may be
  }
  if (size > MAX_MESSAGE_BYTES) return new DomainError('invalid', 'PAYLOAD_TOO_LARGE', `A message event may have at most ${MAX_MESSAGE_BYTES} bytes`);
  if (!validateBody(input)) {
    const { field, message } = describeIssue(validateBody.errors?.[0] ?? {});
    return new DomainError('invalid', 'VALIDATION_FAILED', `${field.replace(/^\//, '') || 'message'} ${message}`);
  }
  return undefined;
}

export function handleClientMessages(socket: RealtimeSocket, messages: MessagesService, contextOf: (requestId: string) => ActorContext, log: FastifyBaseLogger): void {
  socket.on('new-message', (...args: unknown[]) => {
    const ack = args[args.length - 1];
    // Without a callback there is nobody to answer: the event is ignored, never half-done.
    if (typeof ack !== 'function' || args.length !== 2) return;
    const answer = ack as Ack;
    const refused = refusal(args[0]);
    if (refused) return answer(errorAck(refused, 'INTERNAL'));
    const input = args[0] as { text: string; room?: string };
    const ctx = contextOf(`socket-${randomUUID()}`);
    messages.postMessage(ctx, input).then(
      (message) => answer({ ok: true, message: presentMessage(message) }),
      (err: unknown) => {
        if (!(err instanceof DomainError)) log.error({ err, requestId: ctx.requestId }, 'new-message failed');
        answer(errorAck(err, 'INTERNAL'));
      },
    );
  });
}
