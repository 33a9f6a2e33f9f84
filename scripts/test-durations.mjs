// A node:test reporter for scripts/test.mjs: one JSON line per test that ended (suites and whole
// files left out), with its file, name and duration, so that the run can hold every test
// to the time a test may take and name the ones over it.
export default async function* durations(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { name, file, details } = event.data;
    // A file the runner cut off is reported as a test named after the file.
    if (details?.type === 'suite' || name === file) continue;
    yield `${JSON.stringify({ file, name, ms: details?.duration_ms ?? 0 })}\n`;
  }
}
