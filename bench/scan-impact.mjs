// What an audit scan costs the other users (issue 39, item 6): `GET /api/v1/tasks?limit=50` as a
// USER, measured with autocannon with no scan running, then while one verification
// (`GET /api/v1/audit-logs/verify`) runs in a loop, then while two do (MAX_CONCURRENT_AUDIT_SCANS'
// default). Each verification is started again as soon as the one before it answers, so that a
// scan runs through the whole of each measure. Target: the p50 with two scans under 2× the idle one.
//
// The load generator runs on the same machine as the server and its database: on two cores, what
// it takes is part of what the scans compete with, as it is for every figure of `npm run bench`.
// Figures are reported, never asserted.
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A loop of scans (`GET scanPath` as the ADMIN, one at a time) until stop() is called; stop()
 * answers once the scan under way has ended, with each completed scan's seconds and records.
 */
function scanLoop(baseUrl, adminToken, scanPath, log) {
  let stopping = false;
  const done = [];
  let refused = 0;
  let failed = 0;
  const loop = (async () => {
    while (!stopping) {
      const started = performance.now();
      let res;
      try {
        res = await fetch(`${baseUrl}${scanPath}`, { headers: { authorization: `Bearer ${adminToken}` } });
      } catch (err) {
        // A scan the client gave up on (undici's own timeouts): counted, and started again.
        failed++;
        log(`scan ${scanPath}: ${err.message}${err.cause ? ` (${err.cause.message ?? err.cause})` : ''}`);
        await sleep(1000);
        continue;
      }
      if (res.status === 429) {
        // The other loop's scan has not released its slot yet: not a scan, try again shortly.
        refused++;
        await res.body?.cancel();
        await sleep(20);
        continue;
      }
      if (!res.ok) throw new Error(`scan ${scanPath}: ${res.status} ${await res.text()}`);
      let records;
      if (scanPath.includes('/verify')) {
        const report = await res.json();
        if (!report.ok) throw new Error(`verification failed: ${JSON.stringify(report)}`);
        records = report.records_checked;
      } else {
        // An export: read through and counted by lines, as a client would take it.
        records = -1;
        for await (const chunk of res.body) for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) records++;
      }
      done.push({ seconds: (performance.now() - started) / 1000, records, ended: performance.now() });
    }
  })();
  loop.catch((err) => log(`scan loop: ${err.message}`));
  return {
    async stop() {
      stopping = true;
      await loop;
      return { scans: done, refused, failed };
    },
  };
}

const median = (xs) => {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)];
};

/**
 * opts: { baseUrl, userToken, adminToken, log, connections = 10, duration = 5 (s per measure),
 *         warmup = 2 (s, no scan), scanPath = '/api/v1/audit-logs/verify', rounds = 1 }
 * With rounds > 1 the three measures run that many times in turn (idle, one, two, idle, …) and
 * each is reported by its median run (by p50), with every run's p50 beside it.
 * Answers { idle, one, two: {p50, p99, rps, runs_p50, scans?}, ratio_one_p50, ratio_two_p50, markdown }.
 */
export async function scanImpactBench(opts) {
  const { baseUrl, userToken, adminToken, log = () => {}, connections = 10, duration = 5, warmup = 2, scanPath = '/api/v1/audit-logs/verify', rounds = 1 } = opts;
  const request = { method: 'GET', path: '/api/v1/tasks?limit=50', headers: { authorization: `Bearer ${userToken}` } };
  // Latencies from each response, to a hundredth of a millisecond: autocannon's own histogram
  // counts whole milliseconds, and an idle p50 here is 1 or 2 ms.
  const measure = async (seconds) => {
    const run = autocannon({ url: baseUrl, connections, duration: seconds, requests: [request] });
    const latencies = [];
    run.on('response', (_client, status, _bytes, ms) => status < 300 && latencies.push(ms));
    const r = await run;
    if (r.non2xx > 0) throw new Error(`GET /tasks: ${r.non2xx} answers that were not 2xx`);
    latencies.sort((a, b) => a - b);
    // No answer at all within the measure (every request timed out): no percentile to give.
    const at = (q) => (latencies.length === 0 ? null : Number(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))].toFixed(2)));
    // Requests autocannon gave up on (10 s without an answer) are counted, not hidden.
    return { p50: at(0.5), p99: at(0.99), rps: Math.round(r.requests.average), ...(r.timeouts > 0 || r.errors > 0 ? { timeouts: r.timeouts, errors: r.errors } : {}) };
  };
  /** One measure with `scans` scan loops running through it. */
  const withScans = async (scans) => {
    const loops = Array.from({ length: scans }, () => scanLoop(baseUrl, adminToken, scanPath, log));
    // Let the scans get past their first reads before the measure starts.
    if (scans > 0) await sleep(300);
    const started = performance.now();
    const m = await measure(duration);
    const ended = performance.now();
    const results = await Promise.all(loops.map((l) => l.stop()));
    if (scans === 0) return m;
    const all = results.flatMap((r) => r.scans);
    // Scans that ended within the measure: how fast the scans went meanwhile.
    const within = all.filter((s) => s.ended > started && s.ended <= ended);
    return {
      ...m,
      scans: {
        completed_during: within.length,
        median_seconds: median(all.map((s) => s.seconds)),
        records: all[0]?.records ?? null,
        refused: results.reduce((n, r) => n + r.refused, 0),
        failed: results.reduce((n, r) => n + r.failed, 0),
      },
    };
  };

  log(`scan impact: GET /tasks?limit=50, ${connections} connections, warm-up ${warmup} s…`);
  await measure(warmup);
  const runs = { idle: [], one: [], two: [] };
  for (let round = 0; round < rounds; round++) {
    for (const [name, scans] of [['idle', 0], ['one', 1], ['two', 2]]) {
      const m = await withScans(scans);
      runs[name].push(m);
      log(`scan impact${rounds > 1 ? ` (round ${round + 1})` : ''}: ${name}: p50 ${m.p50} ms, p99 ${m.p99} ms, ${m.rps} req/s${m.scans ? `; scans took ${m.scans.median_seconds?.toFixed(1)} s (median)` : ''}`);
    }
  }
  const pick = (list) => {
    const m = [...list].sort((a, b) => (a.p50 ?? Infinity) - (b.p50 ?? Infinity))[Math.floor((list.length - 1) / 2)];
    return { ...m, runs_p50: list.map((r) => r.p50) };
  };
  const idle = pick(runs.idle);
  const one = pick(runs.one);
  const two = pick(runs.two);
  const ratio = (m) => (m.p50 === null || !idle.p50 ? null : m.p50 / idle.p50);
  const result = { idle, one, two, ratio_one_p50: ratio(one), ratio_two_p50: ratio(two), connections, duration, scan: scanPath };
  return { ...result, markdown: scanImpactMarkdown(result) };
}

export function scanImpactMarkdown(r) {
  const f = (n, d = 2) => (typeof n === 'number' ? n.toFixed(d) : '—');
  const scanCell = (m) => {
    if (!m.scans) return '—';
    const failed = m.scans.failed > 0 ? `; ${m.scans.failed} given up by the client` : '';
    return `${m.scans.completed_during} ended; ${f(m.scans.median_seconds, 1)} s each (median)${failed}`;
  };
  const ratioCell = (ratio) => (ratio === undefined ? '—' : ratio === null ? 'no answer' : `**${ratio.toFixed(2)}×**`);
  const timeouts = (m) => (m.timeouts ? ` (${m.timeouts} timed out)` : '');
  const row = (name, m, ratio) => `| ${name} | ${f(m.p50)} | ${f(m.p99)} | ${m.rps.toLocaleString('en')}${timeouts(m)} | ${ratioCell(ratio)} | ${scanCell(m)} |`;
  const records = r.two.scans?.records ?? r.one.scans?.records;
  const rounds = r.idle.runs_p50.length;
  return [
    '## Audit scans and the other users',
    '',
    `\`GET /api/v1/tasks?limit=50\` as a USER (autocannon, ${r.connections} connections, ${r.duration} s a measure) with no scan running, then while one and two ` +
      `\`${r.scan.replace('/api/v1', '')}\` run back to back as the ADMIN${records != null ? ` (${records.toLocaleString('en')} records each)` : ''}. ` +
      `Target: p50 with two scans under 2× the idle p50.${rounds > 1 ? ` Median of ${rounds} rounds by p50 (each round's p50: idle ${r.idle.runs_p50.join(', ')}; one ${r.one.runs_p50.join(', ')}; two ${r.two.runs_p50.join(', ')}).` : ''}`,
    '',
    '| scans running | p50 ms | p99 ms | req/s | p50 ÷ idle | the scans meanwhile |',
    '| --- | ---: | ---: | ---: | ---: | --- |',
    row('none', r.idle),
    row('one', r.one, r.ratio_one_p50),
    row('two', r.two, r.ratio_two_p50),
    '',
    `Target p50 (two scans) < 2× idle: ${r.ratio_two_p50 !== null && r.ratio_two_p50 < 2 ? 'yes' : '**no**'}.`,
    '',
  ].join('\n');
}
