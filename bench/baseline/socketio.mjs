// The real-time ceiling for bench/realtime.mjs: a bare Socket.IO 4 server on a plain node:http
// server, the same Socket.IO version and options Teamlog uses (path /socket.io, 1 MiB
// maxHttpBufferSize, no compression), with no authentication, no rooms to read, no presence,
// no outbox, no database. POST /broadcast {text} builds a message shaped like Teamlog's
// `new-message` packet ({id, room, author_id, text, created_at, event_id}) and sends it to every
// connected socket with io.emit, then answers 201 with it: the trigger costs one HTTP round trip,
// as Teamlog's POST /api/v1/messages does. GET /health answers 200.
import { createServer } from 'node:http';
import { Server } from 'socket.io';

const port = Number(process.env.PORT ?? 3412);
const host = process.env.HOST ?? '127.0.0.1';
let lastId = 0;

const http = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/health') {
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    return;
  }
  if (req.method === 'POST' && req.url === '/broadcast') {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      let text;
      try {
        text = String(JSON.parse(body).text);
      } catch {
        res.writeHead(400).end();
        return;
      }
      lastId += 1;
      const message = { id: lastId, room: 'general', author_id: 1, text, created_at: new Date().toISOString(), event_id: lastId };
      io.emit('new-message', message);
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify(message));
    });
    return;
  }
  res.writeHead(404).end();
});

const io = new Server(http, { path: '/socket.io', maxHttpBufferSize: 1024 * 1024, serveClient: false });
io.on('connection', (socket) => socket.join('general'));

http.listen(port, host);
const stop = () => {
  io.disconnectSockets(true);
  io.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
