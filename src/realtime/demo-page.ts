// GET /realtime-demo: one page a person can use to try real-time (docs/api.md section 6): log in,
// connect with the socket.io client the service serves itself, watch the messages,
// notifications and presence arrive, send a message and see its acknowledgement, disconnect and
// reconnect (replay from the last event_id), log out. No build step, no framework, nothing from
// another origin. Its script and its styles are files of their own (/realtime-demo.js,
// /realtime-demo.css) and it has no inline event handlers or style attributes, so the page runs
// under a strict Content-Security-Policy (script-src 'self', style-src 'self': http/plugins.ts).
// Anything from the server or the user is shown with textContent, never as HTML.
import type { FastifyInstance } from 'fastify';

// Plain browser JavaScript (no template literals or backslashes: it lives in a template string).
const SCRIPT = `
'use strict';
const $ = (id) => document.getElementById(id);
const s = { token: null, refreshToken: null, user: null, socket: null, lastEventId: null, online: new Set(), refresh: null };
const shown = { messages: new Set(), notifications: new Set() };

const text = (id, value) => { $(id).textContent = value == null ? '' : String(value); };
const describe = (err) => (err.code ? err.code + ': ' : '') + err.message;
function notice(message) { text('notice', message); $('notice').hidden = !message; }
function setState(label, error) {
  text('conn-state', label);
  if (error !== undefined) text('conn-error', error);
  text('toggle', s.socket && s.socket.active ? 'Disconnect' : 'Reconnect');
}

async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  if (s.token) headers.authorization = 'Bearer ' + s.token;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch('/api/v1' + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) throw Object.assign(new Error((data && data.detail) || 'HTTP ' + res.status), { code: data && data.code });
  return data;
}

/** A list item of labelled parts, each set with textContent. */
function item(parts) {
  const li = document.createElement('li');
  for (const [cls, value] of parts) {
    const span = document.createElement('span');
    span.className = cls;
    span.textContent = String(value);
    li.append(span, ' ');
  }
  return li;
}
/** Puts a list item in its place by id (oldest first, or newest first), once per id. */
function place(list, id, li, newestFirst) {
  if (shown[list].has(id)) return;
  shown[list].add(id);
  li.dataset.id = String(id);
  const next = [...$(list).children].find((c) => (newestFirst ? Number(c.dataset.id) < id : Number(c.dataset.id) > id));
  $(list).insertBefore(li, next || null);
}
const time = (iso) => new Date(iso).toLocaleTimeString();

function showMessage(m) {
  const li = item([['time', time(m.created_at)], ['room', m.room === 'general' ? '' : '[' + m.room + ']'], ['author', 'user ' + m.author_id + ':'], ['text', m.text]]);
  li.dataset.testid = 'message';
  place('messages', m.id, li, false);
}
function showNotification(n) {
  const summary = Object.entries(n.payload || {}).map(([k, v]) => k + '=' + (typeof v === 'string' ? v : JSON.stringify(v))).join(', ');
  const li = item([['time', time(n.created_at)], ['kind', n.kind], ['payload', summary.slice(0, 300)]]);
  li.dataset.testid = 'notification';
  place('notifications', n.id, li, true);
}
function renderPresence() {
  $('presence').replaceChildren(...[...s.online].sort((a, b) => a - b).map((id) => {
    const li = item([['user', 'user ' + id + (s.user && id === s.user.id ? ' (you)' : '')]]);
    li.dataset.userId = String(id);
    li.dataset.testid = 'presence-user';
    return li;
  }));
}
function logEvent(name, payload) {
  const li = item([['event-id', payload && payload.event_id != null ? '#' + payload.event_id : ''], ['name', name]]);
  $('events').prepend(li);
  while ($('events').children.length > 50) $('events').lastChild.remove();
}

/** The REST lists, for a start or after resync-required; live events merge in by id. */
async function loadRecent() {
  const [messages, notifications] = await Promise.all([api('GET', '/messages?room=general&limit=20'), api('GET', '/notifications?limit=20')]);
  messages.data.forEach(showMessage);
  notifications.data.forEach(showNotification);
}

function connect() {
  setState('connecting', '');
  // auth as a function: every (re)connection sends the current token and the last event_id.
  const socket = (s.socket = io({
    path: '/socket.io',
    transports: ['websocket'],
    auth: (cb) => cb(s.lastEventId === null ? { token: s.token } : { token: s.token, last_event_id: s.lastEventId }),
  }));
  socket.onAny((name, payload) => {
    const id = payload && payload.event_id;
    if (Number.isSafeInteger(id) && (name === 'resync-required' || s.lastEventId === null || id > s.lastEventId)) s.lastEventId = id;
    text('last-event-id', s.lastEventId);
    logEvent(name, payload);
  });
  socket.on('connect', () => setState('connected', ''));
  socket.on('disconnect', (reason) => {
    setState((socket.active ? 'reconnecting' : 'disconnected') + ' (' + reason + ')');
    s.online.clear();
    renderPresence();
  });
  socket.on('connect_error', (err) => {
    const code = err.data && err.data.code ? ' (' + err.data.code + ')' : '';
    setState(socket.active ? 'reconnecting' : 'disconnected', 'connect_error: ' + err.message + code);
  });
  socket.io.on('reconnect_attempt', (n) => setState('reconnecting (attempt ' + n + ')'));
  socket.on('new-message', showMessage);
  socket.on('new-notification', showNotification);
  socket.on('presence-snapshot', (p) => { s.online = new Set(p.online); renderPresence(); });
  socket.on('user-online', (p) => { s.online.add(p.user_id); renderPresence(); });
  socket.on('user-offline', (p) => { s.online.delete(p.user_id); renderPresence(); });
  socket.on('resync-required', (p) => {
    notice('Missed events are no longer kept (' + p.reason + ', oldest ' + p.oldest_event_id + '): the lists were reloaded.');
    loadRecent().catch((err) => notice('Reload failed: ' + describe(err)));
  });
}

/** Refreshes the access token before it expires and hands the new one to the socket (reauth). */
function scheduleRefresh(seconds) {
  clearTimeout(s.refresh);
  s.refresh = setTimeout(async () => {
    try {
      const data = await api('POST', '/auth/refresh', { refresh_token: s.refreshToken });
      s.token = data.access_token;
      s.refreshToken = data.refresh_token;
      if (s.socket && s.socket.connected) s.socket.emit('reauth', { token: s.token }, (a) => a.ok || notice('reauth refused: ' + describe(a.error)));
      scheduleRefresh(data.expires_in);
    } catch (err) {
      notice('Token refresh failed: ' + describe(err));
    }
  }, Math.max(1, seconds * 0.8) * 1000);
}

function showSession(loggedIn) {
  $('login-form').hidden = loggedIn;
  $('session').hidden = !loggedIn;
}

$('login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  text('login-error', '');
  try {
    const data = await api('POST', '/auth/login', { email: $('email').value, password: $('password').value });
    $('password').value = '';
    Object.assign(s, { token: data.access_token, refreshToken: data.refresh_token, user: data.user, lastEventId: null });
    for (const list of ['messages', 'notifications', 'events']) $(list).replaceChildren();
    Object.values(shown).forEach((seen) => seen.clear());
    notice('');
    text('me', data.user.email + ' (user ' + data.user.id + ', ' + data.user.role + ')');
    showSession(true);
    scheduleRefresh(data.expires_in);
    connect();
    loadRecent().catch((err) => notice('Could not load the recent messages: ' + describe(err)));
  } catch (err) {
    text('login-error', describe(err));
  }
});

$('send-form').addEventListener('submit', (e) => {
  e.preventDefault();
  text('send-error', '');
  const room = $('message-room').value.trim();
  const payload = room ? { text: $('message-text').value, room } : { text: $('message-text').value };
  if (!s.socket || !s.socket.connected) return text('send-error', 'Not connected');
  s.socket.timeout(5000).emit('new-message', payload, (err, ack) => {
    if (err) return text('send-error', 'No acknowledgement within 5 s');
    if (!ack.ok) return text('send-error', ack.error.code + ': ' + ack.error.message);
    showMessage(ack.message);
    $('message-text').value = '';
  });
});

$('toggle').addEventListener('click', () => {
  if (s.socket && s.socket.active) s.socket.disconnect();
  else if (s.socket) { setState('connecting', ''); s.socket.connect(); }
});

$('logout').addEventListener('click', async () => {
  notice('');
  try {
    await api('POST', '/auth/logout');
  } catch (err) {
    notice('Logout: ' + describe(err));
  }
  clearTimeout(s.refresh);
  if (s.socket) s.socket.off().disconnect();
  Object.assign(s, { token: null, refreshToken: null, user: null, socket: null, online: new Set() });
  renderPresence();
  showSession(false);
  setState('logged out', '');
});
`;

const STYLE = `
body { font: 15px/1.4 system-ui, sans-serif; margin: 1rem auto; max-width: 70rem; padding: 0 1rem; color: #222; }
main { display: grid; grid-template-columns: 2fr 1fr; gap: 1rem; }
section { border: 1px solid #ccc; border-radius: 6px; padding: .5rem 1rem; margin-bottom: 1rem; }
ol, ul { padding-left: 1.2rem; overflow-wrap: anywhere; }
.time, .event-id, .room { color: #777; } .author, .kind { font-weight: 600; }
form, #session p { margin: .5rem 0 1rem; } #message-text { width: 30rem; max-width: 100%; }
[role=alert] { color: #b00020; } #notice { background: #fff3cd; padding: .5rem; }
`;

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Teamlog real-time demo</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/realtime-demo.css">
</head>
<body>
<h1>Teamlog real-time demo</h1>
<p>Connection: <strong id="conn-state" data-testid="conn-state">logged out</strong>
  <span id="conn-error" data-testid="conn-error" role="alert"></span>
  · last event_id: <span id="last-event-id" data-testid="last-event-id">none</span></p>
<p id="notice" data-testid="notice" hidden></p>
<form id="login-form" data-testid="login-form">
  <label>Email <input id="email" data-testid="email" type="email" autocomplete="username" required></label>
  <label>Password <input id="password" data-testid="password" type="password" autocomplete="current-password" required></label>
  <button id="login" data-testid="login" type="submit">Log in</button>
  <span id="login-error" data-testid="login-error" role="alert"></span>
</form>
<div id="session" data-testid="session" hidden>
  <p>Logged in as <span id="me" data-testid="me"></span>
    <button id="toggle" data-testid="toggle" type="button">Disconnect</button>
    <button id="logout" data-testid="logout" type="button">Log out</button></p>
  <form id="send-form" data-testid="send-form">
    <input id="message-text" data-testid="message-text" placeholder="Message (1 to 2000 characters)" autocomplete="off">
    <input id="message-room" data-testid="message-room" placeholder="general" size="12" aria-label="Room">
    <button id="send" data-testid="send" type="submit">Send</button>
    <span id="send-error" data-testid="send-error" role="alert"></span>
  </form>
</div>
<main>
  <section><h2>Messages</h2><ol id="messages" data-testid="messages"></ol></section>
  <div>
    <section><h2>Online</h2><ul id="presence" data-testid="presence"></ul></section>
    <section><h2>Notifications</h2><ul id="notifications" data-testid="notifications"></ul></section>
    <section><h2>Events</h2><ul id="events" data-testid="events"></ul></section>
  </div>
</main>
<script src="/socket.io/socket.io.min.js"></script>
<script src="/realtime-demo.js"></script>
</body>
</html>
`;

export function registerRealtimeDemo(app: FastifyInstance): void {
  const files: Array<[string, string, string]> = [
    ['/realtime-demo', 'text/html; charset=utf-8', PAGE],
    ['/realtime-demo.js', 'text/javascript; charset=utf-8', SCRIPT],
    ['/realtime-demo.css', 'text/css; charset=utf-8', STYLE],
  ];
  for (const [url, type, body] of files) {
    app.get(url, { schema: { hide: true } }, async (_request, reply) => {
      reply.header('content-type', type).header('cache-control', 'no-store');
      return body;
    });
  }
}
