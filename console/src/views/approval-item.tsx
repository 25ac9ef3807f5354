import { useQueryClient } from '@tanstack/react-query';
import { useId, useState } from 'react';
import type { Approval, ProposalApproval, ToolCallApproval } from '../api-types';
import { api } from '../api';
import { ConfirmDialog } from '../confirm-dialog';
import { describeDelivery } from '../delivery';
import { ErrorAlert } from '../error-alert';
import { FileDiff } from '../file-diff';
import { expiresIn, instant, waitingFor } from '../time';
import { LearnedFrom } from '../learned-from';
import { useChange } from '../use-change';

type Verdict = 'approve' | 'reject';

const ASK = {
  approve: { title: 'Approve this?', confirm: 'Confirm approval', pending: 'Approving…', tone: 'primary' },
  reject: { title: 'Reject this?', confirm: 'Confirm rejection', pending: 'Rejecting…', tone: 'danger' },
} as const;

export const approvalTitle = (item: Approval) =>
  item.kind === 'routine_run'
    ? `${item.label} (${item.appId}/${item.slug})`
    : item.kind === 'tool_call'
      ? `Tool call ${item.modelName}`
      : `Memory proposal ${item.id}`;

/** What a decision is about, in one line for the confirmation dialog. */
const decisionSubject = (item: Approval) =>
  item.kind === 'routine_run'
    ? item.gate.detail
    : item.kind === 'tool_call'
      ? `Runs ${item.tool} on ${item.server} once, with the arguments shown.`
      : `Changes ${item.files.map((f) => f.path).join(', ') || 'no file'} as shown.`;

/** The decision, on the route the item's `approve` and `reject` links name (api/routes/approvals.ts). */
function decide(item: Approval, verdict: Verdict, note: string) {
  const body = note.trim() ? { note } : {};
  const { agentId, id } = item;
  switch (item.kind) {
    case 'routine_run':
      return api.POST(`/v1/agents/{agentId}/routine-runs/{runId}/${verdict}`, {
        params: { path: { agentId, runId: id } },
        body,
      });
    case 'tool_call':
      return api.POST(`/v1/agents/{agentId}/tool-calls/{callId}/${verdict}`, {
        params: { path: { agentId, callId: id } },
        body,
      });
    case 'proposal':
      return api.POST(`/v1/agents/{agentId}/proposals/{id}/${verdict}`, { params: { path: { agentId, id } }, body });
  }
}

/**
 * One thing waiting for a person: what it would do, how long it has waited and when it expires, and Approve and
 * Reject, each confirmed in a dialog. `onDecided` hears of a decision the API took.
 */
export function ApprovalItem({ item, onDecided }: { item: Approval; onDecided: (id: string) => void }) {
  const headingId = useId();
  const noteId = useId();
  const [note, setNote] = useState('');
  const [asking, setAsking] = useState<Verdict | null>(null);
  const queryClient = useQueryClient();
  const decision = useChange({
    mutationFn: async (verdict: Verdict) => {
      await decide(item, verdict, note);
    },
    onSuccess: () => {
      onDecided(item.id);
      // The inboxes, and what the decision moves on: the agent's run, memory or conversation.
      void queryClient.invalidateQueries({ queryKey: ['approvals'] });
      void queryClient.invalidateQueries({ queryKey: ['agents', item.agentId] });
    },
    onSettled: () => setAsking(null),
  });

  const ask = asking ? ASK[asking] : ASK.approve;
  return (
    <article className="card" aria-labelledby={headingId}>
      <h3 id={headingId}>{approvalTitle(item)}</h3>
      <p className="meta">
        <span>
          Agent <strong>{item.agentId}</strong>
        </span>
        <span title={`since ${instant(item.waitingSince)}`}>{waitingFor(item.waitingSince)}</span>
        <span title={instant(item.expiresAt)}>{expiresIn(item.expiresAt)}</span>
      </p>
      {item.kind === 'routine_run' ? (
        <dl className="facts">
          <div>
            <dt>Capability</dt>
            <dd>
              <code>{item.gate.capability}</code>
            </dd>
          </div>
          <div>
            <dt>Detail</dt>
            <dd className="text">{item.gate.detail}</dd>
          </div>
          {item.gate.target ? (
            <div>
              <dt>Target</dt>
              <dd className="text">{describeDelivery(item.gate.target)}</dd>
            </div>
          ) : null}
        </dl>
      ) : item.kind === 'tool_call' ? (
        <ToolCallDetails item={item} />
      ) : (
        <ProposalDetails item={item} />
      )}
      <div className="field">
        <label htmlFor={noteId}>Note (optional)</label>
        <textarea id={noteId} rows={2} maxLength={2000} value={note} onChange={(e) => setNote(e.target.value)} />
      </div>
      <div className="actions">
        <button
          type="button"
          className="button primary"
          disabled={decision.isPending}
          onClick={() => setAsking('approve')}
        >
          Approve
        </button>
        <button
          type="button"
          className="button danger"
          disabled={decision.isPending}
          onClick={() => setAsking('reject')}
        >
          Reject
        </button>
      </div>
      <ErrorAlert error={decision.error} />
      <ConfirmDialog
        isOpen={asking !== null}
        title={ask.title}
        confirmLabel={ask.confirm}
        pendingText={ask.pending}
        tone={ask.tone}
        pending={decision.isPending}
        onConfirm={() => asking && decision.send(asking)}
        onCancel={() => setAsking(null)}
      >
        <p>{approvalTitle(item)}</p>
        <p className="text">{decisionSubject(item)}</p>
        {note.trim() ? <p className="text">Note: {note}</p> : null}
      </ConfirmDialog>
    </article>
  );
}

function ToolCallDetails({ item }: { item: ToolCallApproval }) {
  const from =
    item.origin.kind === 'delegate' ? `delegate ${item.origin.delegateId ?? ''}` : `turn ${item.origin.turnId}`;
  return (
    <dl className="facts">
      <div>
        <dt>Tool</dt>
        <dd>
          <code>{item.tool}</code> on server <code>{item.server}</code>
        </dd>
      </div>
      <div>
        <dt>Arguments</dt>
        <dd>
          <pre className="code">{JSON.stringify(item.arguments, null, 2)}</pre>
        </dd>
      </div>
      <div>
        <dt>Asked by</dt>
        <dd className="text">{from}</dd>
      </div>
    </dl>
  );
}

function ProposalDetails({ item }: { item: ProposalApproval }) {
  return (
    <>
      {item.reason ? <p className="text">{item.reason}</p> : null}
      {item.changes.length ? (
        <ul className="changes">
          {item.changes.map((c, i) => (
            <li key={i}>
              <code>{c.file}</code> ({c.action}){c.summary ? `: ${c.summary}` : ''}
              {c.rationale ? <span className="muted"> — {c.rationale}</span> : null}
            </li>
          ))}
        </ul>
      ) : null}
      {item.files.map((f) => (
        <FileDiff key={f.path} path={f.path} before={f.before} after={f.after} />
      ))}
      <ProposalChecks checks={item.checks} />
      <LearnedFrom agentId={item.agentId} conversationIds={item.conversationIds} />
    </>
  );
}

/**
 * The admission checks. A proposal waits only when every other hard check passed (its one failing check is the
 * approval itself, which the reason above says); soft warnings are worth reading before deciding.
 */
function ProposalChecks({ checks }: { checks: ProposalApproval['checks'] }) {
  if (!checks.length) return null;
  const warnings = checks.filter((c) => !c.passed && c.kind === 'soft');
  const passed = checks.filter((c) => c.passed).length;
  return (
    <ul className="compact">
      <li>
        {passed} of {checks.length} admission checks passed
      </li>
      {warnings.map((c) => (
        <li key={c.name} className="text">
          Warning: {c.name}
          {c.detail ? `: ${c.detail}` : ''}
        </li>
      ))}
    </ul>
  );
}
