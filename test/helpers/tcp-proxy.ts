// A TCP relay to a service (PostgreSQL, Redis) that a test can cut and restore, slow down or
// silence: an outage, a slow network or a host that stops answering, as one process sees it,
// while the others use the service directly.
import net from 'node:net';

export class TcpProxy {
  private listener: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  /** Every answer of the service reaches the client this much later, in order (0: at once). */
  replyDelayMs = 0;
  /**
   * Bytes either way are dropped and neither side's close is passed on: a host that has gone
   * silent (a blackhole) while the TCP connections stay open.
   */
  silent = false;
  constructor(private readonly target: { host: string; port: number }) {}

  /** Listens on 127.0.0.1 (port 0: any free port) and returns the port. */
  async start(port = 0): Promise<number> {
    const listener = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.on('data', (chunk: Buffer) => {
        if (!this.silent) upstream.write(chunk);
      });
      client.on('end', () => this.silent || upstream.end());
      upstream.on('data', (chunk: Buffer) => {
        if (this.silent) return;
        // Timers of equal delay fire in the order they were set: the bytes stay in order.
        if (this.replyDelayMs === 0) client.write(chunk);
        else setTimeout(() => client.writable && client.write(chunk), this.replyDelayMs);
      });
      upstream.on('end', () => this.silent || setTimeout(() => client.end(), this.replyDelayMs));
    });
    this.listener = listener;
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(port, '127.0.0.1', () => resolve());
    });
    return (listener.address() as net.AddressInfo).port;
  }

  /** Refuses new connections and cuts every open one. */
  async stop(): Promise<void> {
    const listener = this.listener;
    this.listener = undefined;
    for (const s of this.sockets) s.destroy();
    if (listener) await new Promise<void>((resolve) => listener.close(() => resolve()));
  }
}
