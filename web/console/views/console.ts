// The signed-in console: search (kept in the URL) and the filter controls that write it, the
// Activity chart, the records table (a card per record on a narrow screen) with Load more and the
// actor/resource pivots, each record named and told in one sentence, Live with its "N new
// records" button, exports, and the details dialog.
import { html } from 'htm/preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type AuditRecord, type ConsoleApi, type ExportFormat, type LiveState, type LiveSubscription, type User } from '../api.js';
import { describeError, localTime, utcTime } from '../format.js';
import { actorTerm, narrow, putQueryInUrl, queryInUrl, resourceTerm } from '../query.js';
import { actorName, nameInMetadata, resourceName, sentence, type Actors, type Names } from '../sentence.js';
import { Activity } from './activity.js';
import { Details } from './details.js';
import { Filters } from './filters.js';
import { StatusLine } from './status.js';

const PAGE_SIZE = 50;
/** Scrolled further down than this, the table holds still and new records wait behind a button. */
const SCROLL_SLACK_PX = 48;
/** With a query, live records are matched by the service: one search per burst, this long after its first record. */
const LIVE_QUERY_DEBOUNCE_MS = 250;

const LIVE_LABEL: Record<LiveState, string> = { connecting: 'connecting…', live: 'connected', reconnecting: 'reconnecting…', off: 'off' };

/** Records not already among `known`, keeping their order. */
const fresh = (records: AuditRecord[], known: AuditRecord[]) => {
  const ids = new Set(known.map((r) => r.id));
  return records.filter((r) => !ids.has(r.id) && (ids.add(r.id), true));
};

function download(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** What a notice is about: it shows only while the query it was said for is the one shown. */
interface Notice {
  text: string;
  q: string | undefined;
}

/** The names a set of records gives resources (a task's title in its CREATE_TASK), to name them in the others. */
function resourceNames(records: AuditRecord[], into = new Map<string, string>()): Map<string, string> {
  for (const r of records) {
    const found = nameInMetadata(r);
    if (found && !into.has(found[0])) into.set(found[0], found[1]);
  }
  return into;
}

function Row({ record, names, onOpen, onNarrow }: { record: AuditRecord; names: Names; onOpen: (r: AuditRecord) => void; onNarrow: (key: string, value: string) => void }) {
  const actor = actorTerm(record.actor_id);
  const resource = resourceTerm(record.resource_type, record.resource_id);
  const person = record.actor_id === null ? undefined : names.actors[String(record.actor_id)];
  // A click anywhere on the row opens it; the pivots and the time are buttons of their own.
  const stop = (fn: () => void) => (e: Event) => {
    e.stopPropagation();
    fn();
  };
  const utc = `${utcTime(record.timestamp)} UTC`;
  return html`
    <tr data-id=${record.id} class=${`result-${record.result.toLowerCase()}`} onClick=${() => onOpen(record)}>
      <td data-label="Time"><button type="button" class="link" onClick=${stop(() => onOpen(record))} title=${`${utc}: details of record ${record.id}`}>
        <time datetime=${record.timestamp}>${localTime(record.timestamp)}</time></button></td>
      <td data-label="Actor"><button type="button" class="link pivot" data-pivot="actor" title=${`${record.actor_id === null ? 'No user' : `User id ${record.actor_id}`}: narrow the search to actor:${actor}`}
        onClick=${stop(() => onNarrow('actor', actor))}>${person?.name || (person ? person.email : actorName(record, names))}</button>
        ${person?.name && html`<span class="email">${person.email}</span>`}</td>
      <td data-label="Action"><span class="sentence">${sentence(record, names)}</span> <code class="action">${record.action}</code></td>
      <td data-label="Resource"><button type="button" class="link pivot" data-pivot="resource" title=${`${resource}: narrow the search to resource:${resource}`} onClick=${stop(() => onNarrow('resource', resource))}>${resourceName(record, names)}</button></td>
      <td data-label="Result"><span class="result">${record.result}</span></td>
      <td data-label="IP">${record.ip ?? '\u2014'}</td>
    </tr>`;
}

export function AuditConsole({ api, user, onSignOut }: { api: ConsoleApi; user: User; onSignOut: () => void }) {
  const [typed, setTyped] = useState(queryInUrl);
  /**
   * The query last run (the search box, a control, the address): what the filter controls read
   * and write. Not `typed`, which changes with each keystroke, nor `activeQ`, which changes when a
   * page arrives: a control used before the last query's page arrived must build on that query.
   */
  const [ranQ, setRanQ] = useState(queryInUrl);
  /** The query the table shows (what exports and live matching use), as opposed to what is being typed. */
  const [activeQ, setActiveQ] = useState<string | undefined>(undefined);
  const [rows, setRows] = useState<AuditRecord[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState('');
  const [notice, setNoticeState] = useState<Notice | undefined>(undefined);
  const [actors, setActors] = useState<Actors>({});
  const [pending, setPending] = useState<AuditRecord[]>([]);
  const [live, setLive] = useState<LiveState>('off');
  const [open, setOpen] = useState<AuditRecord | undefined>(undefined);
  const [exporting, setExporting] = useState<ExportFormat | undefined>(undefined);
  const search = useRef<HTMLInputElement>(null);
  const table = useRef<HTMLTableElement>(null);
  const loadSeq = useRef(0);
  const subscription = useRef<LiveSubscription | undefined>(undefined);
  // What live callbacks read: the values of the last render.
  const current = useRef({ rows, pending, activeQ, actors });
  current.current = { rows, pending, activeQ, actors };
  /** A notice about the query shown now: it goes when another query is run. */
  const setNotice = (text: string) => setNoticeState(text ? { text, q: current.current.activeQ } : undefined);
  /** People the records name, from every page read (live records name theirs through the next page). */
  const meet = (more: Actors) => setActors((old) => ({ ...old, ...more }));

  const load = useCallback(
    async (q: string, more?: string | null) => {
      const seq = ++loadSeq.current;
      setLoading(true);
      try {
        const page = await api.listAuditLogs({ q, cursor: more, limit: PAGE_SIZE });
        if (seq !== loadSeq.current) return;
        setActiveQ(q);
        setError('');
        meet(page.actors);
        if (more) setRows((old) => [...old, ...fresh(page.data, old)]);
        else {
          setRows(page.data);
          setPending([]);
        }
        setCursor(page.next_cursor);
      } catch (err) {
        if (seq !== loadSeq.current) return;
        // An invalid query shows the service's own words (its 400's detail).
        setError(err instanceof ApiError ? err.detail : describeError(err));
        if (!more) {
          setActiveQ(q);
          setRows([]);
          setPending([]);
          setCursor(null);
        }
      } finally {
        if (seq === loadSeq.current) setLoading(false);
      }
    },
    [api],
  );

  const run = (q: string) => {
    const text = q.trim();
    // A notice belongs to the query it was said for.
    setNoticeState(undefined);
    // Another list: read from its top (a pivot deep in the table, a filter control).
    if (scrollY > SCROLL_SLACK_PX) scrollTo({ top: 0 });
    setTyped(text);
    setRanQ(text);
    putQueryInUrl(text);
    void load(text);
  };

  useEffect(() => {
    void load(queryInUrl());
    search.current?.focus();
    // Back and forward run the query the address holds.
    const onPop = () => {
      setNoticeState(undefined);
      setTyped(queryInUrl());
      setRanQ(queryInUrl());
      void load(queryInUrl());
    };
    addEventListener('popstate', onPop);
    return () => {
      removeEventListener('popstate', onPop);
      subscription.current?.close();
    };
  }, [load]);

  const scrolledDown = () => scrollY > SCROLL_SLACK_PX;

  /** New records, newest first: at the top, or behind the button while the reader is further down. */
  const arrive = (records: AuditRecord[]) => {
    const { rows: shown, pending: waiting } = current.current;
    const news = fresh(records, [...shown, ...waiting]);
    if (news.length === 0) return;
    if (scrolledDown()) setPending([...news, ...waiting]);
    else {
      setRows([...news, ...waiting, ...shown]);
      setPending([]);
    }
  };

  const matchTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  /** The newest page of the query, its records not shown yet brought in; once per burst. */
  const fetchNewest = () => {
    const q = current.current.activeQ;
    if (q === undefined || matchTimer.current) return;
    matchTimer.current = setTimeout(() => {
      matchTimer.current = undefined;
      api.listAuditLogs({ q, limit: PAGE_SIZE }).then(
        (page) => current.current.activeQ === q && (meet(page.actors), arrive(page.data)),
        () => undefined,
      );
    }, LIVE_QUERY_DEBOUNCE_MS);
  };
  const onLiveRecord = (record: AuditRecord) => {
    const q = current.current.activeQ;
    if (q === undefined) return;
    if (q === '') {
      arrive([record]);
      // Someone the page has not met yet: the newest page names them (include=actors).
      if (record.actor_id !== null && !current.current.actors[String(record.actor_id)]) fetchNewest();
      return;
    }
    // The service decides what a query matches.
    fetchNewest();
  };

  const toggleLive = () => {
    if (subscription.current) {
      subscription.current.close();
      subscription.current = undefined;
      return;
    }
    subscription.current = api.subscribeAuditRecords({
      record: onLiveRecord,
      resync: () => {
        setNotice('Live missed records that are no longer kept for replay: the list was reloaded.');
        void load(current.current.activeQ ?? '');
      },
      reconnectedWithoutPosition: fetchNewest,
      state: (state) => setLive(state),
    });
  };

  const showPending = () => {
    setRows((old) => [...current.current.pending, ...old]);
    setPending([]);
    scrollTo({ top: 0 });
    table.current?.focus({ preventScroll: true });
  };

  const exportAs = async (format: ExportFormat) => {
    const q = current.current.activeQ ?? '';
    setExporting(format);
    setNotice('');
    try {
      const blob = await api.exportFile(format, q);
      download(blob, `audit-log-${new Date().toISOString().replace(/[:.]/g, '-')}.${format === 'ocsf' ? 'ocsf.ndjson' : format}`);
      setNotice(`Exported ${blob.size.toLocaleString('en')} bytes as ${format.toUpperCase()}${q ? ` for "${q}"` : ''}.`);
    } catch (err) {
      setNotice(`Export failed: ${err instanceof ApiError ? err.detail : describeError(err)}`);
    } finally {
      setExporting(undefined);
    }
  };

  const liveOn = live !== 'off';
  const names: Names = { actors, resources: resourceNames(rows, resourceNames(pending)) };
  const shownNotice = notice && notice.q === activeQ ? notice.text : '';
  return html`
    <header class="top">
      <h1>Audit log</h1>
      <p class="who">Signed in as ${user.email} <button type="button" onClick=${onSignOut}>Sign out</button></p>
      <${StatusLine} api=${api} />
    </header>
    <main>
      <form class="search" role="search" onSubmit=${(e: Event) => (e.preventDefault(), run(typed))}>
        <label for="q">Search</label>
        <input id="q" ref=${search} type="search" value=${typed} onInput=${(e: Event) => setTyped((e.target as HTMLInputElement).value)}
          aria-describedby="q-help q-error" autocomplete="off" spellcheck=${false} />
        <span id="q-help" class="hint">Enter runs it. <code>action:LOGIN_FAILURE</code> <code>actor:12</code> <code>resource:TASK/5</code>
          <code>result:DENIED</code> <code>ip:10.0.0.0/8</code> <code>created:>=2026-11-26</code>; <code>-</code> negates.</span>
      </form>
      <p id="q-error" class="error" role="alert">${error}</p>
      <${Filters} q=${ranQ} onQuery=${run} />
      <div class="toolbar">
        <button type="button" role="switch" aria-checked=${liveOn ? 'true' : 'false'} class="switch" onClick=${toggleLive}>Live</button>
        <span class="live-state" aria-live="polite">${liveOn ? LIVE_LABEL[live] : ''}</span>
        <span class="spacer"></span>
        <button type="button" onClick=${() => exportAs('csv')} disabled=${exporting !== undefined}>Export CSV</button>
        <button type="button" onClick=${() => exportAs('ndjson')} disabled=${exporting !== undefined}>Export NDJSON</button>
        <button type="button" onClick=${() => exportAs('ocsf')} disabled=${exporting !== undefined} title="NDJSON of OCSF 1.8 events, for a SIEM">Export OCSF</button>
      </div>
      <p class="notice" role="status">${exporting ? `Exporting ${exporting.toUpperCase()}…` : shownNotice}</p>
      <${Activity} api=${api} q=${activeQ} onQuery=${run} />
      ${pending.length > 0 &&
      html`<p class="new-records"><button type="button" onClick=${showPending}>${pending.length} new ${pending.length === 1 ? 'record' : 'records'}</button></p>`}
      <table ref=${table} tabindex="-1" aria-busy=${loading ? 'true' : 'false'} aria-describedby="table-summary">
        <thead>
          <tr><th scope="col">Time</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Resource</th><th scope="col">Result</th><th scope="col">IP</th></tr>
        </thead>
        <tbody>
          ${rows.map((r) => html`<${Row} key=${r.id} record=${r} names=${names} onOpen=${setOpen} onNarrow=${(key: string, value: string) => run(narrow(current.current.activeQ ?? '', key, value))} />`)}
        </tbody>
      </table>
      <p id="table-summary" class="hint">
        ${loading ? 'Loading…' : `${rows.length.toLocaleString('en')} ${rows.length === 1 ? 'record' : 'records'} shown, newest first${activeQ ? ` for "${activeQ}"` : ''}.`}
      </p>
      ${cursor && html`<p><button type="button" onClick=${() => load(current.current.activeQ ?? '', cursor)} disabled=${loading}>Load more</button></p>`}
    </main>
    ${open && html`<${Details} api=${api} record=${open} names=${names} onClose=${() => setOpen(undefined)} />`}`;
}
