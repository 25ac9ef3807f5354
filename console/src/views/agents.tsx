import { useInfiniteQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { agentsQuery } from '../agents-query';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { href } from '../routes';
import { SearchBox } from '../search-box';
import { TableWrap } from '../table-wrap';
import { instant, relative } from '../time';
import { useDebounced } from '../use-debounced';
import type { ViewProps } from '../view-props';
import { ViewHead } from '../view-head';

/**
 * Where the console opens: every agent the token may see, by id, searched by id or name, with what each holds and
 * waits for. Each links to its conversations, which makes it the agent chosen.
 */
export function AgentsView({ agentId, headingRef }: ViewProps) {
  const approvalsId = useId();
  const [typed, setTyped] = useState('');
  const q = useDebounced(typed.trim());
  const list = useInfiniteQuery(agentsQuery(q));
  const items = list.data ?? [];
  const waiting = items.reduce((sum, a) => sum + a.waitingApprovals, 0);

  return (
    <section aria-labelledby="view-heading">
      <ViewHead
        title="Agents"
        headingRef={headingRef}
        onRefresh={() => void list.refetch()}
        loading={list.isFetching}
      />
      <section aria-labelledby={approvalsId}>
        <h3 id={approvalsId}>Approvals</h3>
        <p>
          {list.isSuccess
            ? `${waiting === 0 ? 'Nothing' : waiting} waiting for a decision among the agents listed. `
            : null}
          <a href={href({ view: 'inbox' })}>Open the approvals inbox</a>
        </p>
      </section>
      <SearchBox label="Search agents" placeholder="id or name contains…" value={typed} onChange={setTyped} />
      <ErrorAlert error={list.error} />
      {items.length === 0 && list.isSuccess ? (
        <p className="notice">
          {q ? `No agent's id or name contains “${q}”.` : 'No agents yet: one comes into being on first use.'}
        </p>
      ) : null}
      {items.length ? (
        <TableWrap label="Agents table">
          <table>
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col">Name</th>
                <th scope="col">Model</th>
                <th scope="col">Conversations</th>
                <th scope="col">Jobs</th>
                <th scope="col">Routines</th>
                <th scope="col">Waiting approvals</th>
                <th scope="col">Last activity</th>
              </tr>
            </thead>
            <tbody>
              {items.map((a) => (
                <tr key={a.agentId}>
                  <td>
                    <a
                      href={href({ view: 'conversations', agentId: a.agentId })}
                      className="agent-link"
                      aria-current={a.agentId === agentId ? 'true' : undefined}
                    >
                      {a.agentId}
                    </a>
                  </td>
                  <td className="text">{a.name}</td>
                  <td>{a.model ?? 'default'}</td>
                  <td className="num">{a.conversations}</td>
                  <td className="num">{a.jobs}</td>
                  <td className="num">{a.routines}</td>
                  <td className="num">{a.waitingApprovals}</td>
                  <td>
                    <time dateTime={a.lastActivityAt} title={instant(a.lastActivityAt)}>
                      {relative(a.lastActivityAt)}
                    </time>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      {list.isLoading ? <p className="muted">Loading…</p> : null}
      <LoadMore list={list} />
    </section>
  );
}
