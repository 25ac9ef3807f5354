import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useId } from 'react';
import { Switch } from 'react-aria-components';
import type { Fork } from '../api-types';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { forkQuery } from '../fork-query';
import { href } from '../routes';
import { toolServersQuery } from '../tool-servers-query';
import { useChange } from '../use-change';

/** When the conversation is a fork: what it was forked from, and which of its tools may have real effects. */
export function ForkBanner({ agentId, conversationId }: { agentId: string; conversationId: string }) {
  const fork = useQuery(forkQuery(agentId, conversationId));
  if (fork.error) return <ErrorAlert error={fork.error} />;
  return fork.data ? <ForkDetails agentId={agentId} fork={fork.data} /> : null;
}

/** The tools a fork may call, by their model-facing names: every server's, and any enabled that left its server. */
function toolNames(servers: { tools: { modelName: string }[] }[], enabled: readonly string[]): string[] {
  return [...new Set([...servers.flatMap((s) => s.tools.map((t) => t.modelName)), ...enabled])].sort();
}

function ForkDetails({ agentId, fork }: { agentId: string; fork: Fork }) {
  const headingId = useId();
  const servers = useQuery(toolServersQuery(agentId));
  const queryClient = useQueryClient();
  const effects = useChange({
    mutationFn: (tools: string[]) =>
      answer(
        api.PUT('/v1/agents/{agentId}/conversations/{conversationId}/fork/effects', {
          params: { path: { agentId, conversationId: fork.conversationId } },
          body: { tools },
        }),
      ),
    onSuccess: (saved) => queryClient.setQueryData(forkQuery(agentId, fork.conversationId).queryKey, saved),
  });
  const enabled = new Set(fork.enabledTools);
  const tools = toolNames(servers.data?.items ?? [], fork.enabledTools);
  const toggle = (tool: string, on: boolean) =>
    effects.send(on ? [...enabled, tool] : fork.enabledTools.filter((t) => t !== tool));
  const overlay = Object.keys(fork.candidate).length > 0;

  return (
    <section className="fork-banner" aria-labelledby={headingId}>
      <p id={headingId}>
        <strong>
          Fork of{' '}
          <a href={href({ view: 'conversation', agentId, conversationId: fork.forkedFrom })}>{fork.forkedFrom}</a> at
          turn {fork.atTurn}: tool calls are dry runs
        </strong>
        {enabled.size ? ', except those of the tools with real effects below' : ''}.
      </p>
      {overlay ? (
        <details>
          <summary>Candidate</summary>
          <pre className="code">{JSON.stringify(fork.candidate, null, 2)}</pre>
        </details>
      ) : null}
      <ErrorAlert error={servers.error ?? effects.error} />
      {tools.length ? (
        <fieldset className="choices">
          <legend>Real effects, by tool</legend>
          {tools.map((tool) => (
            <Switch
              key={tool}
              className="switch"
              isSelected={enabled.has(tool)}
              isDisabled={effects.isPending}
              onChange={(on) => toggle(tool, on)}
            >
              <span className="switch-track" aria-hidden="true" />
              <code>{tool}</code>
            </Switch>
          ))}
        </fieldset>
      ) : servers.isSuccess ? (
        <p className="muted">The agent has no tools: nothing to enable.</p>
      ) : null}
    </section>
  );
}
