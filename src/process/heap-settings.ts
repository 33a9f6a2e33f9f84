// V8's heap settings for Teamlog's processes, applied first thing by the server and the CLI (a
// side-effect import, first in their entry modules). Allocation-site pretenuring is off: the
// service keeps few long-lived objects, and with it on, the rows of one long audit scan taught V8
// to allocate every later row in the old generation, where only full collections free them
// (docs/performance.md, "Memory after audit scans").
import v8 from 'node:v8';

v8.setFlagsFromString('--no-allocation-site-pretenuring');
