// A real-time event as a use case emits it and the outbox carries it (modules/outbox/outbox.events.ts
// says how it travels): a floor below the use-case runner, which collects them, and the modules.
export interface OutboxEvent {
  /** Socket.IO event name, e.g. `task-updated`. */
  name: string;
  /** Target room: `user:<id>`, `project:<id>`, `general` or `admin`. */
  room: string;
  payload: Record<string, unknown>;
}

/** An event with its event_id. */
export interface NumberedEvent extends OutboxEvent {
  event_id: number;
}
