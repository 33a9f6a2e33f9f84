// `teamlog witness serve`'s HTTP side: POST /add-checkpoint (C2SP/C2SP tlog-witness.md) and
// nothing else. The decision is src/tlog/witness.ts's; this file reads bodies, holds each log's
// state in memory as its file says, and persists a new state before it answers the cosignature.
//
// Once a body is read, the check against the state, the durable write and the answer's bytes
// happen in one synchronous step: no other request runs in between, so two requests can never
// both pass the `old` check (the race the spec describes), for one log or across logs.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Cosigner } from '../tlog/cosignature.js';
import {
  INITIAL_STATE, SIZE_CONTENT_TYPE, addCheckpoint, parseAddCheckpoint, type WitnessState, type WitnessedLog,
} from '../tlog/witness.js';
import { readState, writeState } from './witness.state.js';

/** Far above an honest request (63 proof lines and a checkpoint with a few signatures take ~8 KiB). */
export const MAX_BODY_BYTES = 64 * 1024;

export interface WitnessServerOptions {
  cosigner: Cosigner;
  logs: WitnessedLog[];
  dataDir: string;
  host: string;
  port: number;
  /** Warnings and errors, one line each. */
  log: (line: string) => void;
  /** How long a client may take to send its headers and body (ms). */
  requestTimeoutMs?: number;
}

export interface WitnessServer {
  url: string;
  close(): Promise<void>;
}

interface LogSlot { log: WitnessedLog; state: WitnessState; broken?: string }

function send(res: http.ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8', headers: http.OutgoingHttpHeaders = {}): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/** The body, or undefined once it was refused (too large) or the client went away. */
function readBody(req: http.IncomingMessage, res: http.ServerResponse): Promise<Buffer | undefined> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
    send(res, 413, `the body is limited to ${MAX_BODY_BYTES} bytes\n`, undefined, { connection: 'close' });
    req.resume();
    return Promise.resolve(undefined);
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    let done = false;
    const finish = (body: Buffer | undefined) => {
      if (done) return;
      done = true;
      resolve(body);
    };
    req.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length > MAX_BODY_BYTES) {
        send(res, 413, `the body is limited to ${MAX_BODY_BYTES} bytes\n`, undefined, { connection: 'close' });
        req.destroy();
        finish(undefined);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => finish(Buffer.concat(chunks)));
    req.on('error', () => finish(undefined));
    req.on('close', () => finish(undefined));
  });
}

/** Reads every log's state (a WitnessStateError if one cannot be read), then listens. */
export async function startWitnessServer(opts: WitnessServerOptions): Promise<WitnessServer> {
  const slots = new Map<string, LogSlot>(opts.logs.map((log) => [log.origin, { log, state: readState(opts.dataDir, log.origin) }]));

  const handle = (body: Buffer, res: http.ServerResponse): void => {
    const request = parseAddCheckpoint(body);
    if (typeof request === 'string') return send(res, 400, `${request}\n`);
    const slot = slots.get(request.checkpoint.origin);
    if (slot?.broken) return send(res, 503, `the state of this log could not be saved (${slot.broken}); restart the witness\n`);
    const answer = addCheckpoint(request, slot?.log, slot?.state ?? INITIAL_STATE, opts.cosigner, Math.floor(Date.now() / 1000));
    if (answer.status === 409) return send(res, 409, answer.body, SIZE_CONTENT_TYPE);
    if (answer.status !== 200) return send(res, answer.status, answer.body);
    if (answer.changed && slot) {
      try {
        writeState(opts.dataDir, slot.log.origin, answer.next);
      } catch (err) {
        // Whether the rename reached the disk is unknown: cosign nothing more for this log until a
        // restart reads the file again.
        slot.broken = (err as Error).message;
        opts.log(`witness: cannot save the state of "${slot.log.origin}": ${slot.broken}`);
        return send(res, 500, 'the state could not be saved; nothing was cosigned\n');
      }
      slot.state = answer.next;
    }
    send(res, 200, answer.body);
  };

  // Slow clients are cut off: headers within 5 s and the whole request within the limit, checked every second.
  const requestTimeout = opts.requestTimeoutMs ?? 10_000;
  const server = http.createServer({ requestTimeout, headersTimeout: Math.min(requestTimeout, 5_000), connectionsCheckingInterval: 1_000 }, (req, res) => {
    const pathname = (req.url ?? '').split('?')[0];
    if (pathname !== '/add-checkpoint') {
      req.resume();
      return send(res, 404, 'not found: this witness answers POST /add-checkpoint only\n');
    }
    if (req.method !== 'POST') {
      req.resume();
      return send(res, 405, 'add-checkpoint takes POST\n', undefined, { allow: 'POST' });
    }
    void readBody(req, res).then((body) => {
      if (body === undefined || res.headersSent) return;
      try {
        handle(body, res);
      } catch (err) {
        opts.log(`witness: ${(err as Error).stack ?? String(err)}`);
        if (!res.headersSent) send(res, 500, 'internal error; nothing was cosigned\n');
      }
    });
  });
  server.maxHeadersCount = 100;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
