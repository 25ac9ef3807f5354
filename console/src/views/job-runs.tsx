import type { JobRun } from '../api-types';
import { apiPath, get } from '../api';
import { ErrorAlert } from '../error-alert';
import { duration, instant } from '../time';
import { useLoad } from '../use-load';

/** A job's runs, newest first: status, how long, where the result went, and why one failed, skipped or waits. */
export function JobRuns({ agentId, jobId, round }: { agentId: string; jobId: string; round: number }) {
  const runs = useLoad(
    `${agentId}\n${jobId}`,
    (signal) => get<JobRun[] | { items: JobRun[] }>(apiPath('agents', agentId, 'jobs', jobId, 'runs'), signal),
    round,
  );
  const items = runs.data ? (Array.isArray(runs.data) ? runs.data : runs.data.items) : [];
  return (
    <>
      <ErrorAlert error={runs.error} />
      {runs.loading && !runs.data ? <p className="muted">Loading…</p> : null}
      {runs.data && items.length === 0 ? <p className="notice">No runs yet.</p> : null}
      {items.length ? (
        <ul className="compact">
          {[...items].reverse().map((r) => (
            <li key={r.runId}>
              <strong>{r.status}</strong> · fired {instant(r.firedAt)}
              {r.finishedAt ? ` · took ${duration(Date.parse(r.finishedAt) - Date.parse(r.firedAt))}` : ''}
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
