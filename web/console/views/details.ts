// One record: what happened in a sentence, every field (the time in the reader's zone and in
// UTC, the actor's name and email beside the id), its metadata as formatted JSON, and Verify
// (verify.ts).
import { html } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { AuditRecord, ConsoleApi } from '../api.js';
import { count, localTime, utcTime } from '../format.js';
import { resourceName, sentence, userName, type Names } from '../sentence.js';
import { verifyRecord, type Verdict } from '../verify.js';
import type { WitnessReport } from '../witnesses.js';

const list = (names: string[]) => names.join(', ');

/** Which witnesses cosigned the checkpoint Verify checked, each cosignature checked here; plainly when none did. */
function WitnessText({ report }: { report: WitnessReport }) {
  if (report.kind === 'no-policy') {
    return html`<span class="witnesses" data-witnesses="none">No witness cosigned this checkpoint: the log asks no witness (it has no witness policy), so it rests on the log\u2019s own key alone.</span>`;
  }
  if (report.kind !== 'checked') return null;
  const missing = report.missing.length ? ` Not cosigned by ${list(report.missing)}.` : '';
  const quorum = ` The service reports the policy\u2019s quorum as ${report.quorumMet ? 'met' : 'not met'}.`;
  if (report.cosigned.length === 0) {
    return html`<span class="witnesses" data-witnesses="none">No witness has cosigned this checkpoint (yet): the policy names ${list(report.missing)}.${quorum}</span>`;
  }
  return html`<span class="witnesses" data-witnesses=${report.cosigned.map((c) => c.witness).join(' ')}>Cosigned by ${report.cosigned.map(
    (c, i) => html`${i > 0 ? ', ' : ''}<strong>${c.witness}</strong> (<time datetime=${c.time} title=${`${utcTime(c.time)} UTC`}>${localTime(c.time)}</time>)`,
  )}, each cosignature checked in this browser with the policy\u2019s key.${missing}${quorum}</span>`;
}

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
        <span> — seq ${count(verdict.seq)} in the checkpoint of ${count(verdict.treeSize)} records, signed by key <code>${verdict.keyId}</code> (${verdict.keyName}) at ${utcTime(verdict.checkpointTime)}</span>
        <br /><${WitnessText} report=${verdict.witnesses} />`;
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

/** A field as the details show it: the raw value, and beside it what people read it as. */
function shown(record: AuditRecord, key: keyof AuditRecord, names: Names): string {
  const value = record[key];
  if (value === null) return key === 'actor_id' ? '\u2014 (the command line, or an unknown email at sign-in)' : '\u2014';
  switch (key) {
    case 'timestamp':
      return `${utcTime(record.timestamp)} UTC (${localTime(record.timestamp)})`;
    case 'actor_id': {
      const name = userName(record.actor_id, names);
      return name === `user ${String(value)}` ? String(value) : `${String(value)}: ${name}`;
    }
    case 'resource_id': {
      const name = resourceName(record, names);
      return name === `${record.resource_type.toLowerCase()} ${String(value)}` || name === `user ${String(value)}` ? String(value) : `${String(value)}: ${name}`;
    }
    default:
      return String(value);
  }
}

export function Details({ api, record, names, onClose }: { api: ConsoleApi; record: AuditRecord; names: Names; onClose: () => void }) {
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
      <p class="sentence">${sentence(record, names)}</p>
      <dl>
        ${FIELDS.map(([key, label]) => html`<div><dt>${label}</dt><dd data-field=${key}>${shown(record, key, names)}</dd></div>`)}
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
