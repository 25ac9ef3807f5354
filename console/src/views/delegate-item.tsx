import { useEffect, useId, useState } from 'react';
import type { Delegate } from '../api-types';
import { apiPath, get, post } from '../api';
import { ErrorAlert } from '../error-alert';
import { href } from '../routes';
import { instant } from '../time';
import { useAction } from '../use-action';

/** How many times (a second apart) a cancelled delegate is read again for its outcome. */
const CANCEL_READS = 20;

/** A delegate's lifecycle, outcome and admission decisions; a live one can be cancelled with a reason. */
export function DelegateItem({
  agentId,
  delegate,
  onChanged,
}: {
  agentId: string;
  delegate: Delegate;
  onChanged: (d: Delegate) => void;
}) {
  const headingId = useId();
  const reasonId = useId();
  const [reason, setReason] = useState('');
  const cancel = useAction();
  const d = delegate;
  const path = apiPath('agents', agentId, 'delegates', d.delegateId);

  const [cancelling, setCancelling] = useState(false);
  const submit = () =>
    void cancel.run(async () => {
      if (!reason.trim()) throw new Error('Give a reason: it is kept in the delegate’s outcome.');
      await post(`${path}/cancel`, { reason: reason.trim() });
      setReason('');
      setCancelling(true);
    });

  // The cancel is a signal: the delegate commits its outcome moments later. Read it until it shows.
  useEffect(() => {
    if (!cancelling || delegate.outcome) return;
    let reads = 0;
    const timer = setInterval(() => {
      if (++reads > CANCEL_READS) return clearInterval(timer);
      get<Delegate>(path).then(onChanged, () => undefined);
    }, 1000);
    return () => clearInterval(timer);
  }, [cancelling, delegate.outcome, path, onChanged]);

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
            <a href={href({ view: 'conversation', conversationId: d.conversationId })}>{d.conversationId}</a>
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
            submit();
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
          <button type="submit" className="button danger" disabled={cancel.pending}>
            Cancel delegate
          </button>
        </form>
      ) : null}
      <ErrorAlert error={cancel.error} />
    </article>
  );
}
