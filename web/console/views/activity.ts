// The Activity chart: the current query's records over time, one bar per hour or day
// (GET /audit-logs/stats), and its top actions and actors. Plain SVG: each bar is a link to the
// query narrowed to its hour or day (a click runs it here; the link can be opened or shared), and
// each top action or actor narrows the query to it.
import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import type { AuditStats, ConsoleApi } from '../api.js';
import { count, describeError, localShort, localTime } from '../format.js';
import { searchInstant, urlFor, withTerm } from '../query.js';

const WIDTH = 600;
const HEIGHT = 120;
const AXIS = 16;
const STEP_MS = { hour: 3600_000, day: 86400_000 } as const;

/** The created term of one bucket: from its start to the last millisecond before the next. */
export function bucketTerm(start: string, interval: 'hour' | 'day'): string {
  const from = new Date(start);
  const to = new Date(from.getTime() + STEP_MS[interval] - 1);
  return `${searchInstant(from)}..${to.toISOString()}`;
}

function Bars({ stats, q, onQuery }: { stats: AuditStats; q: string; onQuery: (q: string) => void }) {
  const buckets = stats.buckets;
  const max = Math.max(1, ...buckets.map((b) => b.count));
  const slot = WIDTH / Math.max(1, buckets.length);
  const barWidth = Math.max(1, slot * 0.8);
  const per = stats.interval === 'hour' ? 'hour' : 'day';
  const first = buckets[0];
  const last = buckets[buckets.length - 1];
  return html`
    <svg class="bars" viewBox=${`0 0 ${WIDTH} ${HEIGHT + AXIS}`} preserveAspectRatio="none" role="group" aria-label=${`Records per ${per}`}>
      ${buckets.map((b, i) => {
        const h = b.count === 0 ? 0 : Math.max(2, (b.count / max) * HEIGHT);
        const narrowed = withTerm(q, 'created', bucketTerm(b.start, stats.interval));
        const label = `${count(b.count)} ${b.count === 1 ? 'record' : 'records'} in the ${per} from ${localTime(b.start)}: show them`;
        return html`<a key=${b.start} href=${urlFor(narrowed)} class="bar" data-start=${b.start} data-count=${b.count}
          onClick=${(e: MouseEvent) => (e.preventDefault(), onQuery(narrowed))}>
          <title>${label}</title>
          <rect class="hit" x=${i * slot} y="0" width=${slot} height=${HEIGHT} />
          <rect x=${i * slot + (slot - barWidth) / 2} y=${HEIGHT - h} width=${barWidth} height=${h} />
        </a>`;
      })}
      <line x1="0" x2=${WIDTH} y1=${HEIGHT + 0.5} y2=${HEIGHT + 0.5} class="axis" />
    </svg>
    <p class="axis-labels" aria-hidden="true"><span>${first ? localShort(first.start) : ''}</span><span>${last ? localShort(last.start) : ''}</span></p>`;
}

export function Activity({ api, q, onQuery }: { api: ConsoleApi; q: string | undefined; onQuery: (q: string) => void }) {
  const [stats, setStats] = useState<AuditStats | undefined | null>(null);
  const [problem, setProblem] = useState('');
  useEffect(() => {
    if (q === undefined) return;
    let stale = false;
    api.stats(q).then(
      (s) => stale || (setStats(s), setProblem('')),
      (err: unknown) => stale || (setStats(null), setProblem(describeError(err))),
    );
    return () => {
      stale = true;
    };
  }, [api, q]);

  // A service without /audit-logs/stats: no chart, nothing to say.
  if (stats === undefined) return null;
  return html`
    <section class="activity" aria-labelledby="activity-title">
      <h2 id="activity-title">Activity</h2>
      ${problem
        ? html`<p class="hint">The activity of this query is not available: ${problem}</p>`
        : stats === null
          ? html`<p class="hint">Counting…</p>`
          : html`
            <div class="chart">
              <p class="hint" id="activity-summary">${count(stats.total)} ${stats.total === 1 ? 'record' : 'records'}, per ${stats.interval === 'hour' ? 'hour' : 'day'}${stats.buckets.length ? '; choose a bar to see its records' : ''}.</p>
              ${stats.buckets.length > 0 && html`<${Bars} stats=${stats} q=${q ?? ''} onQuery=${onQuery} />`}
            </div>
            <div class="tops">
              <div>
                <h3>Top actions</h3>
                <ol>${stats.top_actions.map((a) => html`<li><button type="button" class="link" onClick=${() => onQuery(withTerm(q ?? '', 'action', a.action))}>${a.action}</button> <span class="n">${count(a.count)}</span></li>`)}</ol>
              </div>
              <div>
                <h3>Top actors</h3>
                <ol>${stats.top_actors.map((a) => {
                  const who = a.actor_id === null ? 'The command line or nobody' : a.name ? `${a.name} (${a.email ?? ''})` : (a.email ?? `user ${a.actor_id}`);
                  const term = a.actor_id === null ? 'none' : String(a.actor_id);
                  return html`<li><button type="button" class="link" title=${a.actor_id === null ? 'actor:none' : `id ${a.actor_id}`} onClick=${() => onQuery(withTerm(q ?? '', 'actor', term))}>${who}</button> <span class="n">${count(a.count)}</span></li>`;
                })}</ol>
              </div>
            </div>`}
    </section>`;
}
