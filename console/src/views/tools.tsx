import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useId } from 'react';
import type { ServerTool, ToolPolicy, ToolServer } from '../api-types';
import { api } from '../api';
import { AgentNeeded } from '../agent-needed';
import { ErrorAlert } from '../error-alert';
import { TableWrap } from '../table-wrap';
import { instant } from '../time';
import { toolServersQuery } from '../tool-servers-query';
import { useChange } from '../use-change';
import type { ViewProps } from '../view-props';

const POLICY_WORDS: Record<ToolPolicy, string> = {
  auto: 'Runs at once',
  approve: 'Waits for a person',
  deny: 'Hidden from the model',
};

const isPolicy = (value: string): value is ToolPolicy => value in POLICY_WORDS;

/** What the server says of a tool: hints only, which a person's policy overrides. */
function hints(t: ServerTool): string {
  const a = t.annotations;
  const said = [
    a.readOnlyHint ? 'read-only' : null,
    a.destructiveHint ? 'destructive' : null,
    a.idempotentHint ? 'idempotent' : null,
  ].filter(Boolean);
  return said.length ? said.join(', ') : 'none';
}

/** The agent's tool servers, their tools, and each tool's policy, which a person changes here. */
export function ToolsView({ agentId, headingRef }: ViewProps) {
  const servers = useQuery(toolServersQuery(agentId));
  return (
    <section aria-labelledby="view-heading">
      <div className="view-head">
        <h2 id="view-heading" ref={headingRef} tabIndex={-1}>
          Tools
        </h2>
        {agentId ? (
          <button type="button" className="button" onClick={() => void servers.refetch()}>
            Refresh
          </button>
        ) : null}
      </div>
      {!agentId ? (
        <AgentNeeded what="tool servers" />
      ) : (
        <>
          <ErrorAlert error={servers.error} />
          {servers.data?.items.length === 0 ? (
            <p className="notice">
              No tool servers. Add one with <code>PUT /v1/agents/{agentId}/tool-servers/:name</code> (docs/tools.md).
            </p>
          ) : null}
          {servers.data?.items.map((s) => (
            <ServerCard key={s.name} agentId={agentId} server={s} />
          ))}
        </>
      )}
    </section>
  );
}

function ServerCard({ agentId, server }: { agentId: string; server: ToolServer }) {
  const headingId = useId();
  const queryClient = useQueryClient();
  const change = useChange({
    mutationFn: ({ tool, policy }: { tool: string; policy: ToolPolicy }) =>
      api.PATCH('/v1/agents/{agentId}/tool-servers/{name}', {
        params: { path: { agentId, name: server.name } },
        body: { policies: { [tool]: policy } },
      }),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: toolServersQuery(agentId).queryKey }),
  });
  const secrets = [...Object.entries(server.headers), ...Object.entries(server.env)];
  return (
    <article className="card" aria-labelledby={headingId}>
      <h3 id={headingId}>{server.name}</h3>
      <p className="meta">
        <span>{server.transport === 'http' ? server.url : [server.command, ...server.args].join(' ')}</span>
        <span>{server.enabled ? 'enabled' : 'disabled'}</span>
        <span>tools listed {instant(server.toolsListedAt)}</span>
        {secrets.map(([name, s]) => (
          <span key={name}>
            {name}: secret <code>{s.fingerprint}</code>
          </span>
        ))}
      </p>
      <ErrorAlert error={change.error} />
      <TableWrap label={`Tools of ${server.name}`}>
        <table>
          <thead>
            <tr>
              <th scope="col">Tool</th>
              <th scope="col">What it does</th>
              <th scope="col">The server says</th>
              <th scope="col">Policy</th>
            </tr>
          </thead>
          <tbody>
            {server.tools.map((t) => (
              <tr key={t.name}>
                <th scope="row">
                  <code>{t.modelName}</code>
                </th>
                <td className="text">{t.description}</td>
                <td>{hints(t)}</td>
                <td>
                  <select
                    aria-label={`Policy of ${t.modelName}`}
                    value={t.policy}
                    disabled={change.isPending}
                    onChange={(e) => isPolicy(e.target.value) && change.send({ tool: t.name, policy: e.target.value })}
                  >
                    {(Object.keys(POLICY_WORDS) as ToolPolicy[]).map((p) => (
                      <option key={p} value={p}>
                        {POLICY_WORDS[p]}
                      </option>
                    ))}
                  </select>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </article>
  );
}
