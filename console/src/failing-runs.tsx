import { get } from './api';
import type { ConsoleConfig, FailingRun } from './api-types';
import { temporalUiLink } from './console-config';
import { useLoad } from './use-load';

const CAUSE: Record<FailingRun['cause'], string> = {
  nondeterminism: 'a nondeterminism error',
  error: 'an error',
};

/**
 * A warning above every view of an agent with runs whose workflow task keeps failing: nothing of theirs moves until
 * an operator exports the history and resets the run (docs/operators.md).
 */
export function FailingRunsWarning({ agentId, config }: { agentId: string; config: ConsoleConfig | undefined }) {
  const path = `/v1/agents/${encodeURIComponent(agentId)}/failing-runs`;
  const failing = useLoad(agentId ? `failing:${agentId}` : null, (signal) => get<{ runs: FailingRun[] }>(path, signal));
  const runs = failing.data?.runs ?? [];
  if (!runs.length) return null;
  return (
    <section className="alert" role="alert" aria-label="Stuck runs">
      <p>
        <strong>
          {runs.length === 1 ? 'One run' : `${runs.length} runs`} of agent {agentId} cannot make progress:
        </strong>{' '}
        each workflow task fails. Export the history and reset the run (docs/operators.md).
      </p>
      <ul>
        {runs.map((r) => {
          const link = temporalUiLink(config, r.workflowId);
          return (
            <li key={r.runId}>
              {link ? <a href={link}>{r.workflowId}</a> : <code>{r.workflowId}</code>} ({r.workflowType}):{' '}
              {CAUSE[r.cause]}, attempt {r.attempt}: {r.lastMessage}
            </li>
          );
        })}
      </ul>
    </section>
  );
}
