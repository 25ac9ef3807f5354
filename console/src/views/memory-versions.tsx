import { useState } from 'react';
import type { MemoryVersion } from '../api-types';
import { apiPath, post } from '../api';
import { ConfirmDialog } from '../confirm-dialog';
import { ErrorAlert } from '../error-alert';
import { instant } from '../time';
import { LearnedFrom } from '../learned-from';
import { useAction } from '../use-action';

const KIND = { initial: 'defaults', proposal: 'learned', rollback: 'rolled back' } as const;

/** Every memory version, newest first: what changed and what it learned from, and a rollback to any earlier one. */
export function MemoryVersions({
  agentId,
  versions,
  onRolledBack,
}: {
  agentId: string;
  versions: MemoryVersion[];
  onRolledBack: () => void;
}) {
  const [asking, setAsking] = useState<number | null>(null);
  const rollback = useAction();
  const current = Math.max(...versions.map((v) => v.version));
  const confirm = (toVersion: number) =>
    void rollback
      .run(() => post(apiPath('agents', agentId, 'memory', 'rollback'), { toVersion }).then(() => undefined))
      .then((ok) => {
        setAsking(null);
        if (ok) onRolledBack();
      });

  return (
    <section aria-labelledby="versions-heading">
      <h3 id="versions-heading">Versions</h3>
      <ErrorAlert error={rollback.error} />
      <ol className="versions" reversed>
        {[...versions].reverse().map((v) => (
          <li key={v.version} className="card">
            <p>
              <strong>Version {v.version}</strong>
              {v.version === current ? ' (current)' : ''} · {KIND[v.kind]}
              {v.rollbackOf !== null ? ` to version ${v.rollbackOf}` : ''} · {instant(v.createdAt)}
            </p>
            {v.changes.length ? (
              <ul className="compact">
                {v.changes.map((c, i) => (
                  <li key={i}>
                    <code>{c.file}</code> ({c.action}){c.summary ? `: ${c.summary}` : ''}
                    {c.rationale ? <span className="muted"> — {c.rationale}</span> : null}
                  </li>
                ))}
              </ul>
            ) : null}
            <LearnedFrom conversationIds={v.learnedFrom} />
            {v.version !== current ? (
              <button type="button" className="button" disabled={rollback.pending} onClick={() => setAsking(v.version)}>
                Roll back to version {v.version}
              </button>
            ) : null}
          </li>
        ))}
      </ol>
      <ConfirmDialog
        isOpen={asking !== null}
        title={`Roll back memory to version ${asking ?? ''}?`}
        confirmLabel="Confirm rollback"
        pendingText="Rolling back…"
        tone="danger"
        pending={rollback.pending}
        onConfirm={() => asking !== null && confirm(asking)}
        onCancel={() => setAsking(null)}
      >
        <p>A new version equal to version {asking} becomes current. Every version stays readable.</p>
      </ConfirmDialog>
    </section>
  );
}
