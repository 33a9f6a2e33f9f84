// How many requests this process is answering, in memory its audit scans' threads share, so
// that a scan gives way to the other users while they wait (givingWay, used by scan.worker.ts).
//
// A scan's worker thread runs at the lowest CPU priority, but that did not keep it off the CPU
// the requests wait for: the PostgreSQL backend that serves its reads runs at the service's
// priority, and the thread's nice value yields only to this process's own threads (with Linux's
// autogroups a nice value counts within its session). A verification under load ran as fast as
// on an idle server, and two of them doubled other users' p50 (issue 39, item 6;
// docs/performance.md, "Audit scans give way"). The scans' own requests are counted apart, so
// that a scan on an otherwise idle service runs at full speed.
import type { Server } from 'node:http';

const REQUESTS = 0;
const SCANS = 1;

/** [requests in progress, of which audit scans]: one buffer per process, shared with the scan workers. */
export type RequestGauge = Int32Array;

export const requestGauge: RequestGauge = new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));

/** The same gauge on the other side of a thread boundary (its buffer crosses in workerData). */
export const gaugeOn = (buffer: SharedArrayBuffer): RequestGauge => new Int32Array(buffer);

/**
 * Counts every request `server` answers, from its arrival until its response closes (sent, or
 * its client gone), but those under `waitingPath`: a Socket.IO long poll waits for events, not
 * for the CPU, and one open would otherwise slow every scan for as long as it lasts.
 */
export function countRequests(server: Server, waitingPath: string, gauge: RequestGauge = requestGauge): void {
  const waiting = `${waitingPath}/`;
  server.on('request', (req, res) => {
    if (req.url?.startsWith(waiting)) return;
    Atomics.add(gauge, REQUESTS, 1);
    res.once('close', () => Atomics.sub(gauge, REQUESTS, 1));
  });
}

/** A scan (an export or a verification) started or ended: its own request is not one it gives way to. */
export const scanStarted = (gauge: RequestGauge = requestGauge): void => void Atomics.add(gauge, SCANS, 1);
export const scanEnded = (gauge: RequestGauge = requestGauge): void => void Atomics.sub(gauge, SCANS, 1);

/** True while requests other than the scans' own are in progress. */
export const othersWaiting = (gauge: RequestGauge): boolean => Atomics.load(gauge, REQUESTS) - Atomics.load(gauge, SCANS) > 0;

/**
 * While other requests are in progress, the scans together work at most one moment in
 * SCANS_ONE_IN: each pauses between two chunks for what it worked since its last pause, times
 * (scans × SCANS_ONE_IN − 1), at most MAX_PAUSE_MS. One scan works a third of the time, each of
 * two a sixth, and so does its PostgreSQL backend, whose reads follow the chunks. With no other
 * request in progress a scan does not pause.
 *
 * A share per scan (each pausing as long as it worked) let two scans take as much as one at full
 * speed, and other users' p50 went to 1.6–2.1× the idle one in full benchmark runs, against a
 * target of 2× (docs/performance.md, "Audit scans share a third").
 */
export const SCANS_ONE_IN = 3;
export const MAX_PAUSE_MS = 250;

/** How many times its work a scan pauses while others wait, with `scans` scans in progress. */
const pauseFactor = (scans: number): number => Math.max(1, scans) * SCANS_ONE_IN - 1;

export interface PauseClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const realClock: PauseClock = { now: () => performance.now(), sleep: (ms) => new Promise((r) => setTimeout(r, ms)) };

/** One scan's pauses: call it between two chunks. */
export function givingWay(others: RequestGauge, clock: PauseClock = realClock): () => Promise<void> {
  let since = clock.now();
  return async () => {
    if (othersWaiting(others)) await clock.sleep(Math.min(MAX_PAUSE_MS, (clock.now() - since) * pauseFactor(Atomics.load(others, SCANS))));
    since = clock.now();
  };
}
