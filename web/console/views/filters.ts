// The filter controls: Action, Result, Actor and Time. Each writes its term into the query (the
// search box shows it, the URL keeps it) and runs it: `q` stays the truth, and the controls only
// read back from it what they can show (one action, one result, one actor, a time range).
import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { AUDIT_RESULTS } from '../../../src/domain/audit-vocabulary.js';
import { searchInstant, termValue, withTerm } from '../query.js';

/** The actions as the contract groups them (docs/api.md section 5): by what they act on. */
export const ACTION_GROUPS: ReadonlyArray<[string, readonly string[]]> = [
  ['Sessions', ['LOGIN_SUCCESS', 'LOGIN_FAILURE', 'LOGOUT', 'PASSWORD_CHANGED', 'SESSION_REVOKED']],
  ['Users', ['CREATE_USER', 'DELETE_USER', 'DEACTIVATE_USER', 'ACTIVATE_USER', 'CHANGE_USER_ROLE', 'UPDATE_USER_EMAIL']],
  ['Projects', ['CREATE_PROJECT', 'DELETE_PROJECT', 'ADD_PROJECT_MEMBER', 'REMOVE_PROJECT_MEMBER', 'CHANGE_PROJECT_MEMBER_ROLE']],
  ['Tasks', ['CREATE_TASK', 'DELETE_TASK', 'ASSIGN_TASK', 'CHANGE_TASK_STATUS']],
  ['Audit log', ['EXPORT_AUDIT_LOG', 'REDACT_PERSONAL_DATA']],
];

const HOUR = 3600_000;
const PRESETS: ReadonlyArray<[string, string, number]> = [
  ['1h', 'Last hour', HOUR],
  ['24h', 'Last 24 hours', 24 * HOUR],
  ['7d', 'Last 7 days', 7 * 24 * HOUR],
  ['30d', 'Last 30 days', 30 * 24 * HOUR],
];

/** A value of the query's term the controls cannot show as one choice (several, or negated only). */
const AS_TYPED = '*';

/** A `datetime-local` value (the reader's zone) as an instant of the search syntax. */
const fromLocalInput = (v: string): string | undefined => (v ? searchInstant(new Date(v)) : undefined);
/** An instant of the search syntax as a `datetime-local` value, in the reader's zone. */
function toLocalInput(v: string | undefined): string {
  const d = v ? new Date(v) : undefined;
  if (!d || Number.isNaN(d.getTime()) || !/T/.test(v!)) return '';
  const local = new Date(d.getTime() - d.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}

/** The created term a time range writes: `>=A`, `<=B` or `A..B`. */
export function createdTerm(from: string | undefined, to: string | undefined): string | undefined {
  if (from && to) return `${from}..${to}`;
  if (from) return `>=${from}`;
  if (to) return `<=${to}`;
  return undefined;
}

/** The bounds a created term names, as far as the controls show them. */
function createdBounds(value: string | undefined): { from?: string; to?: string } {
  if (!value) return {};
  const range = /^([^.]+)\.\.([^.]+)$/.exec(value);
  if (range) return { from: range[1], to: range[2] };
  if (value.startsWith('>=') || value.startsWith('>')) return { from: value.replace(/^>=?/, '') };
  if (value.startsWith('<=') || value.startsWith('<')) return { to: value.replace(/^<=?/, '') };
  return {};
}

export function Filters({ q, onQuery }: { q: string; onQuery: (q: string) => void }) {
  const action = termValue(q, 'action');
  const result = termValue(q, 'result');
  const actor = termValue(q, 'actor');
  const created = termValue(q, 'created');
  const [actorText, setActorText] = useState(actor ?? '');
  // The choice last made here, and the term it wrote: a term typed in the search box shows as Range.
  const [chosen, setChosen] = useState<{ id: string; term: string | undefined }>({ id: '', term: undefined });
  useEffect(() => setActorText(actor ?? ''), [actor]);
  const bounds = createdBounds(created);
  const timeChoice = created === undefined ? (chosen.id === 'range' ? 'range' : '') : chosen.term === created && chosen.id !== 'range' ? chosen.id : 'range';

  const set = (key: string, value: string | undefined) => onQuery(withTerm(q, key, value === '' ? undefined : value));
  const choosePreset = (value: string) => {
    const found = PRESETS.find(([id]) => id === value);
    // To the minute: a preset reads as a time, not as the instant the control was used.
    const term = found ? `>=${searchInstant(new Date(Math.floor((Date.now() - found[2]) / 60_000) * 60_000))}` : undefined;
    setChosen({ id: value, term });
    if (found) set('created', term);
    else if (value === '') set('created', undefined);
    // Range: the inputs below write it; until then the query keeps what it had.
  };
  const setBound = (which: 'from' | 'to', v: string) => {
    const next = { ...bounds, [which]: fromLocalInput(v) };
    set('created', createdTerm(next.from, next.to));
  };
  const showRange = timeChoice === 'range';

  return html`
    <fieldset class="filters">
      <legend class="visually-hidden">Filters</legend>
      <p>
        <label for="f-action">Action</label>
        <select id="f-action" value=${action === '' ? AS_TYPED : (action ?? '').toUpperCase()} onChange=${(e: Event) => set('action', (e.target as HTMLSelectElement).value)}>
          <option value="">Any action</option>
          ${action === '' && html`<option value=${AS_TYPED} disabled>As in the search</option>`}
          ${ACTION_GROUPS.map(([group, actions]) => html`<optgroup label=${group}>${actions.map((a) => html`<option value=${a}>${a}</option>`)}</optgroup>`)}
        </select>
      </p>
      <p>
        <label for="f-result">Result</label>
        <select id="f-result" value=${result === '' ? AS_TYPED : (result ?? '').toUpperCase()} onChange=${(e: Event) => set('result', (e.target as HTMLSelectElement).value)}>
          <option value="">Any result</option>
          ${result === '' && html`<option value=${AS_TYPED} disabled>As in the search</option>`}
          ${AUDIT_RESULTS.map((r) => html`<option value=${r}>${r}</option>`)}
        </select>
      </p>
      <form class="actor-filter" onSubmit=${(e: Event) => e.preventDefault()}>
        <label for="f-actor">Actor</label>
        <input id="f-actor" type="text" value=${actorText} placeholder="email or id" autocomplete="off" spellcheck=${false}
          onInput=${(e: Event) => setActorText((e.target as HTMLInputElement).value)}
          onChange=${(e: Event) => set('actor', (e.target as HTMLInputElement).value.trim())} />
      </form>
      <p>
        <label for="f-time">Time</label>
        <select id="f-time" value=${showRange ? 'range' : timeChoice} onChange=${(e: Event) => choosePreset((e.target as HTMLSelectElement).value)}>
          <option value="">Any time</option>
          ${PRESETS.map(([id, label]) => html`<option value=${id}>${label}</option>`)}
          <option value="range">Range…</option>
        </select>
      </p>
      ${showRange &&
      html`<p class="range">
        <label for="f-from">From</label><input id="f-from" type="datetime-local" value=${toLocalInput(bounds.from)} onChange=${(e: Event) => setBound('from', (e.target as HTMLInputElement).value)} />
        <label for="f-to">To</label><input id="f-to" type="datetime-local" value=${toLocalInput(bounds.to)} onChange=${(e: Event) => setBound('to', (e.target as HTMLInputElement).value)} />
      </p>`}
    </fieldset>`;
}
