import { AgentNeeded } from '../agent-needed';
import type { ViewProps } from '../view-props';
import { JobsSection } from './jobs';
import { RoutinesSection } from './routines';

/** What runs on a schedule: the agent's jobs, and the routines of its apps. */
export function JobsAndRoutinesView({ agentId, headingRef }: ViewProps) {
  return (
    <section aria-labelledby="view-heading">
      <h2 id="view-heading" ref={headingRef} tabIndex={-1}>
        Jobs and routines
      </h2>
      {!agentId ? (
        <AgentNeeded what="jobs and routines" />
      ) : (
        <>
          <JobsSection agentId={agentId} />
          <RoutinesSection agentId={agentId} />
        </>
      )}
    </section>
  );
}
