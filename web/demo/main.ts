// The real-time demo (GET /realtime-demo, src/realtime/demo-page.ts; docs/realtime.md): one page
// a person can use to try real-time, built on @teamlog/client. Log in; the client connects the
// socket and the page shows the messages, notifications and presence as they arrive; send a
// message over the socket and see its acknowledgement; disconnect and reconnect (the client
// resumes from the last event_id, and the service replays what was missed); log out. The
// client renews the access token and sends it to the socket (reauth) by itself.
//
// Bundled by scripts/build-web.mjs into dist/web/demo/, a file of its own, so that the page runs
// under the pages' Content-Security-Policy (no inline script or style, no eval). Anything from
// the service or the user is shown with textContent, never as HTML.
import { TeamlogError, createClient, type Message, type Notification, type RealtimeEvents, type ServerEvents, type TeamlogClient, type User } from '@teamlog/client';

interface Session {
  client: TeamlogClient;
  user: User;
  /** Whether the socket should be connected: the toggle's state. */
  wanted: boolean;
  online: Set<number>;
  lastEventId: number | undefined;
  /** Stops each of the page's handlers. */
  offs: Array<() => void>;
}

let s: Session | undefined;
const shown = { messages: new Set<number>(), notifications: new Set<number>() };

const $ = (id: string): HTMLElement => document.getElementById(id)!;
const field = (id: string) => $(id) as HTMLInputElement;
const text = (id: string, value: unknown) => void ($(id).textContent = value === undefined || value === null ? '' : String(value));
const describe = (err: unknown) => (err instanceof TeamlogError ? `${err.code}: ${err.detail}` : err instanceof Error ? err.message : String(err));

function notice(message: string): void {
  text('notice', message);
  $('notice').hidden = !message;
}

function setState(label: string, error?: string): void {
  text('conn-state', label);
  if (error !== undefined) text('conn-error', error);
  text('toggle', s?.wanted ? 'Disconnect' : 'Reconnect');
}

/** A list item of labelled parts, each set with textContent. */
function item(parts: Array<[string, unknown]>): HTMLLIElement {
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
function place(list: keyof typeof shown, id: number, li: HTMLLIElement, newestFirst: boolean): void {
  if (shown[list].has(id)) return;
  shown[list].add(id);
  li.dataset.id = String(id);
  const next = [...$(list).children].find((c) => {
    const other = Number((c as HTMLElement).dataset.id);
    return newestFirst ? other < id : other > id;
  });
  $(list).insertBefore(li, next ?? null);
}

const time = (iso: string) => new Date(iso).toLocaleTimeString();

function showMessage(m: Message): void {
  const li = item([['time', time(m.created_at)], ['room', m.room === 'general' ? '' : `[${m.room}]`], ['author', `user ${m.author_id}:`], ['text', m.text]]);
  li.dataset.testid = 'message';
  place('messages', m.id, li, false);
}

function showNotification(n: Notification): void {
  const summary = Object.entries(n.payload ?? {})
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(', ');
  const li = item([['time', time(n.created_at)], ['kind', n.kind], ['payload', summary.slice(0, 300)]]);
  li.dataset.testid = 'notification';
  place('notifications', n.id, li, true);
}

function renderPresence(): void {
  const online = s ? [...s.online].sort((a, b) => a - b) : [];
  $('presence').replaceChildren(
    ...online.map((id) => {
      const li = item([['user', `user ${id}${s && id === s.user.id ? ' (you)' : ''}`]]);
      li.dataset.userId = String(id);
      li.dataset.testid = 'presence-user';
      return li;
    }),
  );
}

function logEvent(name: string, eventId: number | undefined): void {
  $('events').prepend(item([['event-id', eventId === undefined ? '' : `#${eventId}`], ['name', name]]));
  while ($('events').children.length > 50) $('events').lastChild!.remove();
}

/** The REST lists, for a start or after resync-required; live events merge in by id. */
async function loadRecent(client: TeamlogClient): Promise<void> {
  const [messages, notifications] = await Promise.all([client.messages.list({ room: 'general', limit: 20 }).page(), client.notifications.list({ limit: 20 }).page()]);
  messages.data.forEach(showMessage);
  notifications.data.forEach(showNotification);
}

/** What the page does with each event of the / namespace, besides listing it under Events. */
const ON_EVENT: { [K in keyof ServerEvents]?: (session: Session, payload: ServerEvents[K]) => void } = {
  'new-message': (_s, m) => showMessage(m),
  'new-notification': (_s, n) => showNotification(n),
  'presence-snapshot': (session, p) => void (session.online = new Set(p.online)),
  'user-online': (session, p) => void session.online.add(p.user_id),
  'user-offline': (session, p) => void session.online.delete(p.user_id),
};
const EVENTS: Array<keyof ServerEvents> = ['new-message', 'new-notification', 'post-liked', 'task-created', 'task-updated', 'task-deleted', 'presence-snapshot', 'user-online', 'user-offline'];

/** Subscribes the page to the session's events: subscribing connects the socket. */
function subscribe(session: Session): void {
  const { realtime } = session.client;
  const current = () => s === session;
  /** The newest event_id seen: where the client resumes from after a reconnection. */
  const seen = (name: string, id: number) => {
    session.lastEventId = name === 'resync-required' || session.lastEventId === undefined ? id : Math.max(session.lastEventId, id);
    text('last-event-id', session.lastEventId);
  };
  for (const name of EVENTS) {
    session.offs.push(
      realtime.on(name, (payload: RealtimeEvents[typeof name]) => {
        if (!current()) return;
        seen(name, payload.event_id);
        logEvent(name, payload.event_id);
        (ON_EVENT[name] as ((session: Session, payload: unknown) => void) | undefined)?.(session, payload);
        if (name.startsWith('user-') || name === 'presence-snapshot') renderPresence();
      }),
    );
  }
  session.offs.push(
    realtime.on('resync-required', (p) => {
      if (!current()) return;
      seen('resync-required', p.event_id);
      logEvent('resync-required', p.event_id);
      notice(`Missed events are no longer kept (${p.reason}, oldest ${p.oldest_event_id}): the lists were reloaded.`);
      loadRecent(session.client).catch((err: unknown) => notice(`Reload failed: ${describe(err)}`));
    }),
    realtime.on('connected', ({ namespace }) => void (current() && namespace === '/' && setState('connected', ''))),
    realtime.on('disconnected', ({ namespace, reason }) => {
      if (!current() || namespace !== '/') return;
      // Closed here (the toggle, logging out), or dropped: then the client reconnects by itself.
      setState(`${reason === 'io client disconnect' ? 'disconnected' : 'reconnecting'} (${reason})`);
      session.online.clear();
      renderPresence();
    }),
    realtime.on('error', ({ error }) => void (current() && text('conn-error', describe(error)))),
  );
}

function showSession(loggedIn: boolean): void {
  $('login-form').hidden = loggedIn;
  $('session').hidden = !loggedIn;
}

/** Forgets the session here (its tokens, its socket, its handlers). */
function end(session: Session): void {
  session.offs.forEach((off) => off());
  session.client.close();
  if (s === session) s = undefined;
  renderPresence();
  showSession(false);
  setState('logged out', '');
}

$('login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  text('login-error', '');
  // One client per session: its tokens are kept in memory only (the client's default store).
  const client = createClient({ baseUrl: location.origin });
  let user: User;
  try {
    user = await client.login(field('email').value, field('password').value);
  } catch (err) {
    client.close();
    return text('login-error', describe(err));
  }
  field('password').value = '';
  const session: Session = (s = { client, user, wanted: true, online: new Set(), lastEventId: undefined, offs: [] });
  client.on('signed-out', ({ reason }) => {
    // Ended by the service (revoked, a refresh refused, deactivated), not by the Log out button.
    if (reason === 'logout' || s !== session) return;
    end(session);
    notice(`The session ended (${reason}): log in again.`);
  });
  for (const list of ['messages', 'notifications', 'events']) $(list).replaceChildren();
  Object.values(shown).forEach((ids) => ids.clear());
  notice('');
  text('me', `${user.email ?? ''} (user ${user.id}, ${user.role})`);
  showSession(true);
  setState('connecting', '');
  subscribe(session);
  loadRecent(client).catch((err: unknown) => notice(`Could not load the recent messages: ${describe(err)}`));
});

$('send-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  text('send-error', '');
  const session = s;
  // sendMessage would connect the socket: a disconnected page says so instead.
  if (!session || !session.client.realtime.connected('/')) return text('send-error', 'Not connected');
  const room = field('message-room').value.trim();
  const message = room ? { text: field('message-text').value, room } : { text: field('message-text').value };
  try {
    showMessage(await session.client.realtime.sendMessage(message, 5000));
    field('message-text').value = '';
  } catch (err) {
    text('send-error', err instanceof TeamlogError ? describe(err) : 'No acknowledgement within 5 s');
  }
});

$('toggle').addEventListener('click', () => {
  if (!s) return;
  s.wanted = !s.wanted;
  if (s.wanted) {
    setState('connecting', '');
    // Resumes after the last event received: the service replays what was missed meanwhile.
    s.client.realtime.connect('/');
  } else s.client.realtime.disconnect('/');
});

$('logout').addEventListener('click', async () => {
  notice('');
  const session = s;
  if (!session) return;
  try {
    await session.client.logout();
  } catch (err) {
    notice(`Logout: ${describe(err)}`);
  }
  end(session);
});

// The handlers are in place (what a test waits for before it uses the page).
document.body.dataset.ready = 'true';
