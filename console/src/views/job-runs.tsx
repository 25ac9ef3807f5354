import { useQuery } from '@tanstack/react-query';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { RunTimes } from './run-times';

/** A job's runs, newest first: status, how long, where the result went, and why one failed, skipped or waits. */
export function JobRuns({ agentId, jobId }: { agentId: string; jobId: string }) {
  const runs = useQuery({
    queryKey: ['agents', agentId, 'jobs', jobId, 'runs'],
    queryFn: ({ signal }) =>
      answer(api.GET('/v1/agents/{agentId}/jobs/{id}/runs', { params: { path: { agentId, id: jobId } }, signal })),
  });
  const items = runs.data ?? [];
  return (
    <>
      <ErrorAlert error={runs.error} />
      {runs.isLoading ? <p className="muted">Loading…</p> : null}
      {runs.data && items.length === 0 ? <p className="notice">No runs yet.</p> : null}
      {items.length ? (
        <ul className="compact">
          {[...items].reverse().map((r) => (
            <li key={r.runId}>
              <strong>{r.status}</strong>
              <RunTimes run={r} workflowId={r.runId} />
              {r.delivery.outcome ? (
                <>
                  {' '}
                  · delivery <code>{r.delivery.outcome}</code> ({r.delivery.attempts} attempt
                  {r.delivery.attempts === 1 ? '' : 's'})
                </>
              ) : null}
              {r.status === 'skipped' && r.error ? (
                <span className="text"> · skipped: {r.error}</span>
              ) : r.error ? (
                <span className="text"> · error: {r.error}</span>
              ) : null}
              {r.budgetBlocked ? <span className="text"> · waiting for a budget: {r.budgetBlocked}</span> : null}
              {r.reply ? <span className="preview text">{r.reply}</span> : null}
            </li>
          ))}
        </ul>
      ) : null}
    </>
  );
}
