// The page's two states: signed out (the sign-in form) and signed in as an ADMIN (the console).
import { html } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type ConsoleApi, type User } from '../api.js';
import { describeError } from '../format.js';
import { AuditConsole } from './console.js';

export const NOT_ADMIN = 'Only administrators can read the audit log.';

function SignIn({ api, notice, onSignedIn }: { api: ConsoleApi; notice: string; onSignedIn: (user: User) => void }) {
  const [error, setError] = useState(notice);
  const [busy, setBusy] = useState(false);
  const email = useRef<HTMLInputElement>(null);
  const password = useRef<HTMLInputElement>(null);
  useEffect(() => setError(notice), [notice]);
  useEffect(() => email.current?.focus(), []);

  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const user = await api.signIn(email.current!.value, password.current!.value);
      password.current!.value = '';
      if (user.role !== 'ADMIN') {
        // No token is kept that cannot read anything here.
        await api.signOut();
        setError(`${NOT_ADMIN} ${user.email} is not one.`);
        return;
      }
      onSignedIn(user);
    } catch (err) {
      setError(err instanceof ApiError ? err.detail : describeError(err));
    } finally {
      setBusy(false);
    }
  }

  return html`
    <main class="signin">
      <h1>Teamlog audit console</h1>
      <form onSubmit=${submit} aria-describedby="signin-error">
        <p><label for="email">Email</label><input id="email" ref=${email} type="email" autocomplete="username" required /></p>
        <p><label for="password">Password</label><input id="password" ref=${password} type="password" autocomplete="current-password" required /></p>
        <p><button type="submit" disabled=${busy}>Sign in</button></p>
        <p id="signin-error" class="error" role="alert">${error}</p>
      </form>
      <p class="hint">For administrators: who did what, searchable, live, and every record checked in this browser against the log's signed checkpoints.</p>
    </main>`;
}

export function App({ api }: { api: ConsoleApi }) {
  const [user, setUser] = useState<User | undefined>(undefined);
  const [notice, setNotice] = useState('');
  useEffect(
    () =>
      api.onSessionEnd((why) => {
        setUser(undefined);
        setNotice(why);
      }),
    [api],
  );

  if (!user) {
    return html`<${SignIn} api=${api} notice=${notice} onSignedIn=${(u: User) => (setNotice(''), setUser(u))} />`;
  }
  const signOut = async () => {
    await api.signOut();
    setNotice('');
    setUser(undefined);
  };
  return html`<${AuditConsole} api=${api} user=${user} onSignOut=${signOut} />`;
}
