import { useId, useState } from 'react';
import type { Routine } from '../api-types';
import { apiPath } from '../api';
import { nextFire, routineSchedule } from '../schedule';
import { LifecycleButtons } from './lifecycle-buttons';
import { RoutineRuns } from './routine-runs';

/** A routine of an app: its schedule, next run, status, its buttons and its runs. */
export function RoutineItem(props: { agentId: string; routine: Routine; onChanged: (r: Routine) => void }) {
  const { agentId, routine: r } = props;
  const headingId = useId();
  const [round, setRound] = useState(0);
  const [showRuns, setShowRuns] = useState(false);
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
      <LifecycleButtons<Routine>
        path={apiPath('agents', agentId, 'apps', r.appId, 'routines', r.slug)}
        status={r.status}
        onChanged={props.onChanged}
        onRan={() => setRound((n) => n + 1)}
      />
      <details onToggle={(e) => setShowRuns(e.currentTarget.open)}>
        <summary>Runs</summary>
        {showRuns ? <RoutineRuns agentId={agentId} appId={r.appId} slug={r.slug} round={round} /> : null}
      </details>
    </article>
  );
}
