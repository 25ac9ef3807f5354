import { useInfiniteQuery } from '@tanstack/react-query';
import { answer, api } from '../api';
import { AgentNeeded } from '../agent-needed';
import { auditDetail } from '../audit-detail';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { TableWrap } from '../table-wrap';
import { instant } from '../time';
import type { ViewProps } from '../view-props';
import { ViewHead } from '../view-head';

/**
 * The chosen agent's audit trail, newest first: what a person did (approved, rejected, rolled back, deleted…), to
 * what, by which token, and when. Older entries a page at a time, each asked from the last one seen.
 */
export function AuditView({ agentId, headingRef }: ViewProps) {
  const trail = useInfiniteQuery({
    queryKey: ['agents', agentId, 'audit'],
    queryFn: ({ pageParam, signal }) =>
      answer(
        api.GET('/v1/agents/{agentId}/audit', {
          params: { path: { agentId }, query: { limit: 50, before: pageParam } },
          signal,
        }),
      ),
    initialPageParam: undefined as number | undefined,
    getNextPageParam: (page) => page.nextBefore ?? undefined,
    select: (data) => data.pages.flatMap((page) => page.entries),
    enabled: agentId !== '',
  });
  const entries = trail.data ?? [];

  return (
    <section aria-labelledby="view-heading">
      <ViewHead
        title="Audit"
        headingRef={headingRef}
        {...(agentId ? { onRefresh: () => void trail.refetch() } : {})}
        loading={trail.isFetching}
      />
      {!agentId ? (
        <AgentNeeded what="audit trail" />
      ) : (
        <>
          <ErrorAlert error={trail.error} />
          {entries.length === 0 && trail.isSuccess ? <p className="notice">Nothing recorded yet.</p> : null}
          {entries.length ? (
            <TableWrap label="Audit trail table">
              <table>
                <thead>
                  <tr>
                    <th scope="col">When</th>
                    <th scope="col">Action</th>
                    <th scope="col">Subject</th>
                    <th scope="col">Who</th>
                    <th scope="col">Detail</th>
                  </tr>
                </thead>
                <tbody>
                  {entries.map((e) => (
                    <tr key={e.id}>
                      <td>
                        <time dateTime={e.at}>{instant(e.at)}</time>
                      </td>
                      <td>
                        <code>{e.action}</code>
                      </td>
                      <td className="text">{e.subject}</td>
                      <td>
                        <code>{e.actor}</code>
                      </td>
                      <td className="text">{auditDetail(e.action, e.detail)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          ) : null}
          {trail.isLoading ? <p className="muted">Loading…</p> : null}
          <LoadMore list={trail} />
        </>
      )}
    </section>
  );
}
