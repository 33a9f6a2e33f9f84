// The status line: how many records the log has sealed and signed, and how old its newest
// signed checkpoint is (the service signs one every few seconds while records wait; an old one
// means sealing has stopped, which an investigator must know before trusting a Verified).
import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import type { CheckpointJson, ConsoleApi } from '../api.js';
import { age, count, describeError } from '../format.js';

const POLL_MS = 5000;

export function StatusLine({ api }: { api: ConsoleApi }) {
  const [checkpoint, setCheckpoint] = useState<CheckpointJson | undefined | null>(null);
  const [problem, setProblem] = useState('');
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    let stopped = false;
    const poll = () =>
      api.latestCheckpoint().then(
        (c) => stopped || (setCheckpoint(c), setProblem('')),
        (err: unknown) => stopped || setProblem(describeError(err)),
      );
    void poll();
    const polling = setInterval(() => void poll(), POLL_MS);
    const ticking = setInterval(() => setNow(Date.now()), 1000);
    return () => {
      stopped = true;
      clearInterval(polling);
      clearInterval(ticking);
    };
  }, [api]);

  let text: string;
  if (problem) text = `Log status unavailable: ${problem}`;
  else if (checkpoint === null) text = 'Reading the log\u2019s status…';
  else if (checkpoint === undefined) text = 'No signed checkpoint yet: nothing is sealed.';
  else
    text = `Log: ${count(checkpoint.tree_size)} ${checkpoint.tree_size === 1 ? 'record' : 'records'} sealed · latest signed checkpoint ${age(now - Date.parse(checkpoint.created_at))} old`;
  // Not a live region: it changes every second, which a screen reader would read out each time.
  return html`<p class="status" id="log-status" data-tree-size=${checkpoint ? checkpoint.tree_size : ''}>${text}</p>`;
}
