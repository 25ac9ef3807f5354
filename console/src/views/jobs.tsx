import { useCallback } from 'react';
import type { Job } from '../api-types';
import { apiPath, getPage } from '../api';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { usePagedList } from '../use-paged-list';
import { JobItem } from './job-item';

/** An agent's scheduled jobs. */
export function JobsSection({ agentId }: { agentId: string }) {
  const list = usePagedList<Job>(`jobs:${agentId}`, (cursor, signal) =>
    getPage(apiPath('agents', agentId, 'jobs'), {}, cursor, signal),
  );
  const { update } = list;
  const changed = useCallback((job: Job) => update((jobs) => jobs.map((j) => (j.id === job.id ? job : j))), [update]);
  return (
    <section aria-labelledby="jobs-heading">
      <div className="view-head">
        <h3 id="jobs-heading">Jobs</h3>
        <button type="button" className="button" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      <ErrorAlert error={list.error} />
      {list.items.length === 0 && !list.loading && !list.error ? <p className="notice">No jobs.</p> : null}
      {list.items.length === 0 && list.loading ? <p className="muted">Loading…</p> : null}
      <div className="cards">
        {list.items.map((job) => (
          <JobItem key={job.id} agentId={agentId} job={job} onChanged={changed} />
        ))}
      </div>
      <LoadMore list={list} />
    </section>
  );
}
