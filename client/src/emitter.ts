// A tiny typed event emitter (the browser has EventTarget, but its events are untyped).
export class Emitter<Events extends { [K in keyof Events]: unknown }> {
  private readonly handlers = new Map<keyof Events, Set<(payload: never) => unknown>>();

  /** Calls `handler` with each `event`; answers the function that stops it. */
  on<K extends keyof Events>(event: K, handler: (payload: Events[K]) => unknown): () => void {
    let set = this.handlers.get(event);
    if (!set) this.handlers.set(event, (set = new Set()));
    set.add(handler as (payload: never) => unknown);
    return () => this.off(event, handler);
  }

  off<K extends keyof Events>(event: K, handler: (payload: Events[K]) => unknown): void {
    this.handlers.get(event)?.delete(handler as (payload: never) => unknown);
  }

  listeners<K extends keyof Events>(event: K): Array<(payload: Events[K]) => unknown> {
    return [...(this.handlers.get(event) ?? [])] as Array<(payload: Events[K]) => unknown>;
  }

  /** Calls every handler; one that throws does not stop the others (its error is reported). */
  emit<K extends keyof Events>(event: K, payload: Events[K], onError: (err: unknown) => void = reportLater): void {
    for (const handler of this.listeners(event)) {
      try {
        const result = handler(payload);
        if (result instanceof Promise) result.catch(onError);
      } catch (err) {
        onError(err);
      }
    }
  }
}

/** An application handler's error, thrown outside the client's own flow (as an event listener's would be). */
export function reportLater(err: unknown): void {
  setTimeout(() => {
    throw err;
  }, 0);
}
