import { useInfiniteQuery } from '@tanstack/react-query';
import { useCallback, useEffect, useState } from 'react';
import { answer, api, ApiError } from '../api';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { pagedQuery } from '../paged-query';
import { go, href } from '../routes';
import type { ViewProps } from '../view-props';
import { ApprovalItem } from './approval-item';
import { ViewHead } from '../view-head';

/** The inbox reads itself again this often: new waits appear without a reload. */
const REFRESH_MS = 15_000;

/**
 * The approvals inbox: every agent's routine runs, tool calls and memory proposals waiting for a person
 * (GET /v1/approvals, #/approvals), or one agent's (#/agents/<agentId>/approvals). A token that sees one agent only
 * is refused the inbox (403): it is shown its agent's instead, at that agent's address.
 */
export function ApprovalsView({ agentId, headingRef, everyAgent }: ViewProps & { everyAgent: boolean }) {
  // Learnt from the first 403, and kept: the token will not see every agent later either.
  const [oneAgent, setOneAgent] = useState(false);
  const list = useInfiniteQuery({
    ...pagedQuery(everyAgent ? ['approvals'] : ['approvals', agentId], async (cursor, signal) => {
      if (everyAgent) {
        try {
          return await answer(api.GET('/v1/approvals', { params: { query: { cursor } }, signal }));
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 403)) throw err;
          setOneAgent(true);
          return { items: [], nextCursor: null };
        }
      }
      const path = { agentId };
      return answer(api.GET('/v1/agents/{agentId}/approvals', { params: { path, query: { cursor } }, signal }));
    }),
    enabled: everyAgent || agentId !== '',
    // Every page read is read again, in order, so a long inbox stays whole.
    refetchInterval: REFRESH_MS,
  });
  useEffect(() => {
    if (everyAgent && oneAgent && agentId) go({ view: 'approvals', agentId }, 'replace');
  }, [everyAgent, oneAgent, agentId]);
  // What was decided here stays out, also when a refresh comes before the server has recorded the decision.
  const [decidedIds, setDecidedIds] = useState<ReadonlySet<string>>(new Set());
  const decided = useCallback((id: string) => setDecidedIds((ids) => new Set(ids).add(id)), []);
  const items = (list.data ?? []).filter((i) => !decidedIds.has(i.id));

  return (
    <section aria-labelledby="view-heading">
      <ViewHead
        title="Approvals"
        headingRef={headingRef}
        onRefresh={() => void list.refetch()}
        loading={list.isFetching}
      />
      {everyAgent ? null : (
        <p className="meta">
          <span>
            Waiting for agent <strong>{agentId}</strong>
          </span>
          {oneAgent ? null : <a href={href({ view: 'inbox' })}>Every agent&apos;s approvals</a>}
        </p>
      )}
      <ErrorAlert error={list.error} />
      {everyAgent && oneAgent ? (
        agentId ? null : (
          <p className="notice">
            This token sees one agent only: type its id in Agent above and press Enter to see what waits for it.
          </p>
        )
      ) : items.length === 0 && list.isSuccess ? (
        <p className="notice">Nothing is waiting for approval.</p>
      ) : null}
      {list.isLoading ? <p className="muted">Loading…</p> : null}
      <div className="cards">
        {items.map((item) => (
          <ApprovalItem key={`${item.kind}:${item.id}`} item={item} onDecided={decided} />
        ))}
      </div>
      <LoadMore list={list} />
    </section>
  );
}
