import { useQueryClient } from '@tanstack/react-query';
import { useId, useState } from 'react';
import type { Job } from '../api-types';
import { api } from '../api';
import { jobSchedule, nextFire } from '../schedule';
import { JobRuns } from './job-runs';
import { LifecycleButtons, type Lifecycle } from './lifecycle-buttons';

const RUN_SETTLE_MS = 3000;

/** A scheduled job: its schedule in words, next fire, status, its buttons and its runs. */
export function JobItem({ agentId, job }: { agentId: string; job: Job }) {
  const headingId = useId();
  const [showRuns, setShowRuns] = useState(false);
  const queryClient = useQueryClient();
  const send = async (verb: Lifecycle) => {
    await api.POST(`/v1/agents/{agentId}/jobs/{id}/${verb}`, { params: { path: { agentId, id: job.id } } });
    // The run is booked a moment after it starts: its runs are read now (the buttons' change) and once more then.
    if (verb === 'run')
      setTimeout(
        () => void queryClient.invalidateQueries({ queryKey: ['agents', agentId, 'jobs', job.id, 'runs'] }),
        RUN_SETTLE_MS,
      );
  };
  return (
    <article className="card" aria-labelledby={headingId}>
      <h4 id={headingId}>{job.name}</h4>
      {/* A job that is not active does not fire, whatever time its row still holds. */}
      <p className="next-fire">{nextFire(job.status === 'active' ? job.nextRunAt : null)}</p>
      <dl className="facts">
        <div>
          <dt>Schedule</dt>
          <dd>{jobSchedule(job.schedule)}</dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd>
            {job.status}
            {job.consecutiveErrors ? ` (${job.consecutiveErrors} errors in a row)` : ''}
          </dd>
        </div>
        <div>
          <dt>Task</dt>
          <dd className="text">{job.task}</dd>
        </div>
      </dl>
      <LifecycleButtons status={job.status} send={send} changes={['agents', agentId, 'jobs']} />
      <details onToggle={(e) => setShowRuns(e.currentTarget.open)}>
        <summary>Runs</summary>
        {showRuns ? <JobRuns agentId={agentId} jobId={job.id} /> : null}
      </details>
    </article>
  );
}
