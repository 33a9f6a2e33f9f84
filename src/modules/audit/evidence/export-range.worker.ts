// A worker thread of verifyExportFile (export.verifier.ts): verifies the byte range it is given
// and posts its progress, then its report. An exception ends the thread, and reaches the caller
// as the worker's 'error' event.
import { parentPort, workerData } from 'node:worker_threads';
import { verifyRange, type RangeTask, type RangeWorkerMessage } from './export-range.verifier.js';

const post = (message: RangeWorkerMessage) => parentPort!.postMessage(message);
const report = await verifyRange(workerData as RangeTask, (checked) => post({ type: 'progress', checked }));
post({ type: 'done', report });
