import { useQuery } from '@tanstack/react-query';
import { answer, api } from './api';
import type { FailingRun } from './api-types';
import { temporalUiLink, type ConsoleConfig } from './console-config';

const CAUSE: Record<FailingRun['cause'], string> = {
  nondeterminism: 'a nondeterminism error',
  error: 'an error',
};

/**
 * A warning above every view of an agent with runs whose workflow task keeps failing: nothing of theirs moves until
 * an operator exports the history and resets the run (docs/operators.md).
 */
export function FailingRunsWarning({ agentId, config }: { agentId: string; config: ConsoleConfig | undefined }) {
  const failing = useQuery({
    queryKey: ['agents', agentId, 'failing-runs'],
    queryFn: ({ signal }) =>
      answer(api.GET('/v1/agents/{agentId}/failing-runs', { params: { path: { agentId } }, signal })),
    enabled: agentId !== '',
  });
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
