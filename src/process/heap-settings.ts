// V8's heap settings for Teamlog's processes, applied first thing by the server and the CLI
// (a side-effect import, first in their entry modules).
//
// Allocation-site pretenuring off. V8 allocates an object straight into the old generation
// once most objects from the same allocation site survived a young-generation collection. A
// verification reads records a chunk ahead of checking them, so the database driver's rows were
// pretenured, and from then on every row any request read (an export's million and a half) was
// born in the old generation and died there: a full collection every 1.5 s, the heap at 130 MB
// between them and the process over 250 MB, where with pretenuring off the young generation
// frees them and the heap stays near 30 MB. The service keeps few long-lived objects, which are
// what pretenuring speeds up. The flag is read at each collection, so setting it at run time
// takes effect (measured: no full collection in an export after a verification).
import v8 from 'node:v8';

v8.setFlagsFromString('--no-allocation-site-pretenuring');
