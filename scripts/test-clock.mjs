// Preloaded (--import) into each test file's process by `node scripts/test.mjs --record-order`:
// when the process exits, appends to TEST_CLOCK_FILE one JSON line with the file, its wall time
// and its CPU time, its own and its reaped children's (the servers and CLIs it started), read
// from /proc. Node 20's test runner reports no duration for a whole file, and a file's time is
// mostly its before hooks and its child processes, which no test's duration counts.
import { appendFileSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const file = process.argv[1] ?? '';
const out = process.env.TEST_CLOCK_FILE;
if (out && file.endsWith('.test.js')) {
  process.on('exit', () => {
    let cpu = null;
    try {
      // /proc/self/stat after the command's ")": utime, stime, cutime, cstime are fields 14-17 (clock ticks, 100 a second).
      const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
      cpu = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0) / 100;
    } catch {
      // Not Linux: wall time only.
    }
    const wall = (Date.now() - performance.timeOrigin) / 1000;
    appendFileSync(out, `${JSON.stringify({ file, wall, cpu })}\n`);
  });
}
