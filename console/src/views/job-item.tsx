import { useId, useState } from 'react';
import type { Job } from '../api-types';
import { apiPath } from '../api';
import { jobSchedule, nextFire } from '../schedule';
import { JobRuns } from './job-runs';
import { LifecycleButtons } from './lifecycle-buttons';

const RUN_SETTLE_MS = 3000;

/** A scheduled job: its schedule in words, next fire, status, its buttons and its runs. */
export function JobItem({ agentId, job, onChanged }: { agentId: string; job: Job; onChanged: (job: Job) => void }) {
  const headingId = useId();
  const [runsRound, setRunsRound] = useState(0);
  const [showRuns, setShowRuns] = useState(false);
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
      <LifecycleButtons<Job>
        path={apiPath('agents', agentId, 'jobs', job.id)}
        status={job.status}
        onChanged={onChanged}
        onRan={() => {
          // The run is booked a moment after it starts: read the runs now and once more then.
          setRunsRound((r) => r + 1);
          setTimeout(() => setRunsRound((r) => r + 1), RUN_SETTLE_MS);
        }}
      />
      <details onToggle={(e) => setShowRuns(e.currentTarget.open)}>
        <summary>Runs</summary>
        {showRuns ? <JobRuns agentId={agentId} jobId={job.id} round={runsRound} /> : null}
      </details>
    </article>
  );
}
