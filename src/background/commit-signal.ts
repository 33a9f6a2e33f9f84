// The use-case runner's announcement that a transaction committed, and what it carried: whether
// it wrote an audit record, and how many real-time events. This process's background work
// listens (the relay numbers events at once, the sealer seals records), so that nothing waits
// for a poll and no NOTIFY is sent per write (PostgreSQL serializes the commits of notifying
// transactions). Commits of other processes (another instance, the CLI) are found by each
// loop's slow safety poll, or by the relay's NOTIFY once it numbered them.
export interface Committed {
  /** The transaction wrote an audit record. */
  audited: boolean;
  /** Real-time events it wrote (the /admin event of its record included). */
  events: number;
}

export class CommitSignal {
  private readonly listeners = new Set<(c: Committed) => void>();

  /** After commit, by the use-case runner. */
  committed(c: Committed): void {
    for (const listener of this.listeners) listener(c);
  }

  /** Answers a function that unsubscribes. */
  onCommitted(listener: (c: Committed) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
