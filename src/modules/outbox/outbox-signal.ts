// Tells this process's outbox sequencer that a transaction with outbox rows has committed, so
// that it numbers them at once: no NOTIFY per write (PostgreSQL serializes the commits of
// notifying transactions), no polling period. Rows committed by another process (the CLI, an
// instance that died before telling) are found by the sequencer's own slow poll.
export class OutboxSignal {
  private readonly listeners = new Set<() => void>();

  /** After commit, by the use-case runner. */
  committed(): void {
    for (const listener of this.listeners) listener();
  }

  /** Answers a function that unsubscribes. */
  onCommitted(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
