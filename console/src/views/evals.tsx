import { useQuery } from '@tanstack/react-query';
import { AgentNeeded } from '../agent-needed';
import { ErrorAlert } from '../error-alert';
import { evalCounts, evalError } from '../eval-summary';
import { evalsQuery } from '../evals-query';
import { href } from '../routes';
import { TableWrap } from '../table-wrap';
import { instant, relative } from '../time';
import { usd } from '../usd';
import type { ViewProps } from '../view-props';
import { ViewHead } from '../view-head';
import { EvalStart } from './eval-start';

/**
 * The chosen agent's evaluations, newest first, followed while one runs; a form starts another. Each opens to its
 * suite's table.
 */
export function EvalsView({ agentId, headingRef }: ViewProps) {
  const list = useQuery(evalsQuery(agentId));
  const items = list.data?.items ?? [];

  return (
    <section aria-labelledby="view-heading">
      <ViewHead
        title="Evaluations"
        headingRef={headingRef}
        {...(agentId ? { onRefresh: () => void list.refetch() } : {})}
        loading={list.isFetching}
      />
      {!agentId ? (
        <AgentNeeded what="evaluations" />
      ) : (
        <>
          <EvalStart agentId={agentId} />
          <h3>Latest evaluations</h3>
          <ErrorAlert error={list.error} />
          {items.length === 0 && list.isSuccess ? <p className="notice">No evaluation yet.</p> : null}
          {items.length ? (
            <TableWrap label="Evaluations table" keepFirstColumn>
              <table>
                <thead>
                  <tr>
                    <th scope="col">Evaluation</th>
                    <th scope="col">Status</th>
                    <th scope="col">Mode</th>
                    <th scope="col">Suite</th>
                    <th scope="col">Passed</th>
                    <th scope="col">Failed</th>
                    <th scope="col">Cost</th>
                    <th scope="col">Created</th>
                  </tr>
                </thead>
                <tbody>
                  {items.map((e) => {
                    const counts = evalCounts(e);
                    const error = evalError(e);
                    return (
                      <tr key={e.id}>
                        <td>
                          <a href={href({ view: 'eval', agentId, evalId: e.id })} title={e.id}>
                            {e.id.slice(0, 8)}
                          </a>
                        </td>
                        <td>
                          {e.status}
                          {error ? <span className="muted"> ({error})</span> : null}
                        </td>
                        <td>{e.mode}</td>
                        <td>{e.suite ?? '—'}</td>
                        <td className="num">{counts ? counts.passed : '—'}</td>
                        <td className="num">{counts ? counts.failed : '—'}</td>
                        <td className="num">{counts ? usd(counts.costUsd) : '—'}</td>
                        <td>
                          <time dateTime={e.createdAt} title={instant(e.createdAt)}>
                            {relative(e.createdAt)}
                          </time>
                        </td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </TableWrap>
          ) : null}
          {list.isLoading ? <p className="muted">Loading…</p> : null}
        </>
      )}
    </section>
  );
}
