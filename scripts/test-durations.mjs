// A node:test reporter for scripts/test.mjs: one JSON line per test that ended (whole files left
// out, and suites unless a hook failed them), with its file, name and duration, so that the run
// can hold every test to the time a test may take and name the ones over it. A failed one also
// carries what it failed with, so that the run's closing summary (the part of a CI log that is
// always kept) says why, not only which.
const MAX_FAILURE_CHARS = 1500;

export default async function* durations(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { name, file, details } = event.data;
    // A file the runner cut off is reported as a test named after the file.
    if (name === file) continue;
    // A suite fails on its own only through a hook (its tests report themselves): kept, untimed.
    if (details?.type === 'suite') {
      if (event.type === 'test:fail' && details.error?.failureType === 'hookFailed') {
        yield `${JSON.stringify({ file, name, suite: true, ms: 0, failureType: 'hookFailed', failure: failure(details.error) })}\n`;
      }
      continue;
    }
    const line = { file, name, ms: details?.duration_ms ?? 0 };
    if (event.type === 'test:fail') Object.assign(line, { failureType: details?.error?.failureType, failure: failure(details?.error) });
    yield `${JSON.stringify(line)}\n`;
  }
}

/** What a test failed with: node:test wraps the thrown error (ERR_TEST_FAILURE) as its cause. */
function failure(err) {
  const cause = err?.cause ?? err;
  const full = cause instanceof Error ? (cause.stack ?? `${cause.name}: ${cause.message}`) : String(cause);
  // The runner's own frames say nothing about the test.
  const text = full.split('\n').filter((l) => !/^\s+at (.*\()?node:/.test(l)).join('\n');
  return text.length > MAX_FAILURE_CHARS ? `${text.slice(0, MAX_FAILURE_CHARS)}…` : text;
}
