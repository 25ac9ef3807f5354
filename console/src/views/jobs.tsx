import { useQuery } from '@tanstack/react-query';
import type { Job } from '../api-types';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { JobItem } from './job-item';

/** An agent's scheduled jobs. */
export function JobsSection({ agentId }: { agentId: string }) {
  const jobs = useQuery({
    queryKey: ['agents', agentId, 'jobs'],
    queryFn: async ({ signal }): Promise<Job[]> =>
      // The answer's schedules are the ones the jobs were created with (api-types.ts, Job).
      (await answer(api.GET('/v1/agents/{agentId}/jobs', { params: { path: { agentId } }, signal }))) as Job[],
  });
  const items = jobs.data ?? [];
  return (
    <section aria-labelledby="jobs-heading">
      <div className="view-head">
        <h3 id="jobs-heading">Jobs</h3>
        <button type="button" className="button" onClick={() => void jobs.refetch()} disabled={jobs.isFetching}>
          Refresh
        </button>
      </div>
      <ErrorAlert error={jobs.error} />
      {items.length === 0 && jobs.isSuccess ? <p className="notice">No jobs.</p> : null}
      {jobs.isLoading ? <p className="muted">Loading…</p> : null}
      <div className="cards">
        {items.map((job) => (
          <JobItem key={job.id} agentId={agentId} job={job} />
        ))}
      </div>
    </section>
  );
}
