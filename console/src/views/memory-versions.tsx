import { useState } from 'react';
import type { MemoryVersion } from '../api-types';
import { api } from '../api';
import { ConfirmDialog } from '../confirm-dialog';
import { ErrorAlert } from '../error-alert';
import { instant } from '../time';
import { LearnedFrom } from '../learned-from';
import { useChange } from '../use-change';

const KIND = { initial: 'defaults', proposal: 'learned', rollback: 'rolled back' } as const;

/** Every memory version, newest first: what changed and what it learned from, and a rollback to any earlier one. */
export function MemoryVersions({
  agentId,
  versions,
  onRolledBack,
}: {
  agentId: string;
  versions: MemoryVersion[];
  /** Reads again what a rollback changed; the dialog stays, pending, until it has. */
  onRolledBack: () => Promise<unknown>;
}) {
  const [asking, setAsking] = useState<number | null>(null);
  const rollback = useChange({
    mutationFn: (toVersion: number) =>
      api.POST('/v1/agents/{agentId}/memory/rollback', { params: { path: { agentId } }, body: { toVersion } }),
    onSuccess: onRolledBack,
    onSettled: () => setAsking(null),
  });
  const current = Math.max(...versions.map((v) => v.version));

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
            <LearnedFrom agentId={agentId} conversationIds={v.learnedFrom} />
            {v.version !== current ? (
              <button
                type="button"
                className="button"
                disabled={rollback.isPending}
                onClick={() => setAsking(v.version)}
              >
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
        pending={rollback.isPending}
        onConfirm={() => asking !== null && rollback.send(asking)}
        onCancel={() => setAsking(null)}
      >
        <p>A new version equal to version {asking} becomes current. Every version stays readable.</p>
      </ConfirmDialog>
    </section>
  );
}
