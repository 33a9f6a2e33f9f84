// One record: every field, its metadata as formatted JSON, and Verify (verify.ts).
import { html } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { AuditRecord, ConsoleApi } from '../api.js';
import { count, utcTime } from '../format.js';
import { verifyRecord, type Verdict } from '../verify.js';

const FIELDS: Array<[keyof AuditRecord, string]> = [
  ['id', 'ID'],
  ['timestamp', 'Time'],
  ['actor_id', 'Actor'],
  ['action', 'Action'],
  ['resource_type', 'Resource type'],
  ['resource_id', 'Resource ID'],
  ['result', 'Result'],
  ['ip', 'IP'],
  ['user_agent', 'User agent'],
  ['request_id', 'Request ID'],
];

function VerdictText({ verdict }: { verdict: Verdict | 'running' | undefined }) {
  if (verdict === undefined) return null;
  if (verdict === 'running') return html`<span>Verifying…</span>`;
  switch (verdict.kind) {
    case 'verified':
      return html`<strong class="ok">Verified</strong>
        <span> — seq ${count(verdict.seq)} in the checkpoint of ${count(verdict.treeSize)} records, signed by key <code>${verdict.keyId}</code> (${verdict.keyName}) at ${utcTime(verdict.checkpointTime)}</span>`;
    case 'failed':
      return html`<strong class="bad">Verification failed</strong><span> at the ${verdict.step} step: ${verdict.reason}</span>`;
    case 'not-sealed':
      return html`<strong>Not sealed yet</strong><span> — records are sealed and signed within seconds of their commit; try again shortly.</span>`;
    case 'insecure':
      return html`<strong>Verification needs HTTPS</strong>
        <span> — browsers give Web Crypto only to secure pages (https://, or http://localhost); open the console over HTTPS to verify here.</span>`;
    case 'error':
      return html`<strong>Could not verify</strong><span> — ${verdict.reason}</span>`;
  }
}

export function Details({ api, record, onClose }: { api: ConsoleApi; record: AuditRecord; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [verdict, setVerdict] = useState<Verdict | 'running' | undefined>(undefined);
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    dialog.current?.showModal();
    return () => opener?.focus();
  }, []);
  useEffect(() => setVerdict(undefined), [record.id]);

  const verify = async () => {
    setVerdict('running');
    setVerdict(await verifyRecord(api, record));
  };

  return html`
    <dialog ref=${dialog} class="details" aria-labelledby="details-title" onClose=${onClose}>
      <h2 id="details-title">Record ${record.id}</h2>
      <dl>
        ${FIELDS.map(([key, label]) => html`<div><dt>${label}</dt><dd data-field=${key}>${record[key] === null ? '—' : String(record[key])}</dd></div>`)}
      </dl>
      <h3>Metadata</h3>
      <pre data-field="metadata" tabindex="0">${JSON.stringify(record.metadata, null, 2)}</pre>
      <div class="actions">
        <button type="button" onClick=${verify} disabled=${verdict === 'running'}>Verify</button>
        <button type="button" onClick=${() => dialog.current?.close()}>Close</button>
      </div>
      <p class="verdict" role="status" data-verdict=${typeof verdict === 'object' ? verdict.kind : ''}><${VerdictText} verdict=${verdict} /></p>
    </dialog>`;
}
