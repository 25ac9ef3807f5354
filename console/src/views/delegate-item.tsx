import { useQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import type { Delegate } from '../api-types';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { href } from '../routes';
import { instant } from '../time';
import { useChange } from '../use-change';

/** How many times (a second apart) a cancelled delegate is read again for its outcome. */
const CANCEL_READS = 20;

/** A delegate's lifecycle, outcome and admission decisions; a live one can be cancelled with a reason. */
export function DelegateItem({ agentId, delegate }: { agentId: string; delegate: Delegate }) {
  const headingId = useId();
  const reasonId = useId();
  const [reason, setReason] = useState('');
  const path = { agentId, delegateId: delegate.delegateId };
  const [cancelling, setCancelling] = useState(false);
  const cancel = useChange({
    mutationFn: async (why: string) => {
      if (!why) throw new Error('Give a reason: it is kept in the delegate’s outcome.');
      await api.POST('/v1/agents/{agentId}/delegates/{delegateId}/cancel', { params: { path }, body: { reason: why } });
    },
    onSuccess: () => {
      setReason('');
      setCancelling(true);
    },
  });

  // The cancel is a signal: the delegate commits its outcome moments later. Read it until it shows.
  const afterCancel = useQuery({
    queryKey: ['agents', agentId, 'delegates', delegate.delegateId],
    queryFn: ({ signal }) =>
      answer(api.GET('/v1/agents/{agentId}/delegates/{delegateId}', { params: { path }, signal })),
    enabled: cancelling && !delegate.outcome,
    refetchInterval: (query) =>
      query.state.data?.outcome || query.state.dataUpdateCount >= CANCEL_READS ? false : 1000,
  });
  const d = afterCancel.data?.outcome ? afterCancel.data : delegate;

  return (
    <article className="card" aria-labelledby={headingId}>
      <h3 id={headingId}>Delegate {d.delegateId}</h3>
      <dl className="facts">
        <div>
          <dt>Lifecycle</dt>
          <dd>{d.lifecycle}</dd>
        </div>
        <div>
          <dt>Conversation</dt>
          <dd>
            <a href={href({ view: 'conversation', agentId, conversationId: d.conversationId })}>{d.conversationId}</a>
          </dd>
        </div>
        {d.taskNumber !== undefined ? (
          <div>
            <dt>Task</dt>
            <dd>#{d.taskNumber}</dd>
          </div>
        ) : null}
        <div>
          <dt>Outcome</dt>
          <dd>{d.outcome ? d.outcome.kind : 'none yet'}</dd>
        </div>
        {d.outcome ? (
          <>
            <div>
              <dt>Result</dt>
              <dd className="text">{d.outcome.result}</dd>
            </div>
            <div>
              <dt>Versions</dt>
              <dd>
                outcome {d.outcome.outcomeVersion}, transcript {d.outcome.transcriptVersion} (ended by{' '}
                {d.outcome.terminalOwner})
              </dd>
            </div>
          </>
        ) : null}
        {d.admittedAt ? (
          <div>
            <dt>Admitted</dt>
            <dd>{instant(d.admittedAt)}</dd>
          </div>
        ) : null}
        {d.relay ? (
          <div>
            <dt>Relay</dt>
            <dd>{d.relay}</dd>
          </div>
        ) : null}
        {d.budgetBlocked ? (
          <div>
            <dt>Waiting for a budget</dt>
            <dd className="text">{d.budgetBlocked}</dd>
          </div>
        ) : null}
      </dl>
      {d.admissions.length ? (
        <>
          <h4>Admission decisions</h4>
          <ul className="compact">
            {d.admissions.map((a, i) => (
              <li key={i}>
                version {a.outcomeVersion}: <strong>{a.decision}</strong> via {a.via}, {instant(a.at)}
              </li>
            ))}
          </ul>
        </>
      ) : null}
      {cancelling && !d.outcome ? <p className="muted">Cancellation sent; waiting for the delegate to end…</p> : null}
      {!d.outcome ? (
        <form
          className="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            cancel.send(reason.trim());
          }}
        >
          <div className="field">
            <label htmlFor={reasonId}>Reason</label>
            <input
              id={reasonId}
              type="text"
              maxLength={1000}
              value={reason}
              onChange={(e) => setReason(e.target.value)}
            />
          </div>
          <button type="submit" className="button danger" disabled={cancel.isPending}>
            Cancel delegate
          </button>
        </form>
      ) : null}
      <ErrorAlert error={cancel.error} />
    </article>
  );
}
