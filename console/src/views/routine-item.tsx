import { useId, useState } from 'react';
import type { Routine } from '../api-types';
import { api } from '../api';
import { nextFire, routineSchedule } from '../schedule';
import { LifecycleButtons, type Lifecycle } from './lifecycle-buttons';
import { RoutineRuns } from './routine-runs';

/** A routine of an app: its schedule, next run, status, its buttons and its runs. */
export function RoutineItem({ agentId, routine: r }: { agentId: string; routine: Routine }) {
  const headingId = useId();
  const [showRuns, setShowRuns] = useState(false);
  const path = { agentId, appId: r.appId, slug: r.slug };
  const send = (verb: Lifecycle) =>
    api.POST(`/v1/agents/{agentId}/apps/{appId}/routines/{slug}/${verb}`, { params: { path } });
  return (
    <article className="card" aria-labelledby={headingId}>
      <h4 id={headingId}>
        {r.label} ({r.appId}/{r.slug})
      </h4>
      <p className="next-fire">{nextFire(r.status === 'active' ? r.nextRunAt : null)}</p>
      <dl className="facts">
        <div>
          <dt>Schedule</dt>
          <dd>{routineSchedule(r)}</dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd>{r.status}</dd>
        </div>
        {r.prompt ? (
          <div>
            <dt>Prompt</dt>
            <dd className="text">{r.prompt}</dd>
          </div>
        ) : null}
      </dl>
      <LifecycleButtons status={r.status} send={send} changes={['agents', agentId, 'apps', r.appId, 'routines']} />
      <details onToggle={(e) => setShowRuns(e.currentTarget.open)}>
        <summary>Runs</summary>
        {showRuns ? <RoutineRuns agentId={agentId} appId={r.appId} slug={r.slug} /> : null}
      </details>
    </article>
  );
}
