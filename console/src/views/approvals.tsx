import { useCallback, useEffect, useRef, useState } from 'react';
import type { Approval } from '../api-types';
import { ApiError, apiPath, getPage } from '../api';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { usePagedList } from '../use-paged-list';
import type { ViewProps } from '../view-props';
import { ApprovalItem } from './approval-item';
import { ViewHead } from '../view-head';

/** The inbox reads itself again this often while it is one page long: new waits appear without a reload. */
const REFRESH_MS = 15_000;

/**
 * The approvals inbox: every agent's routine runs and memory proposals waiting for a person (GET /v1/approvals), or
 * the chosen agent's when the token sees one agent only (that route then answers 403).
 */
export function ApprovalsView({ agentId, headingRef }: ViewProps) {
  // Learnt from the first 403, and kept: the token will not see every agent later either.
  const oneAgent = useRef(false);
  const [needsAgent, setNeedsAgent] = useState(false);
  const list = usePagedList<Approval>(`approvals:${agentId}`, async (cursor, signal) => {
    if (!oneAgent.current) {
      try {
        return await getPage<Approval>('/v1/approvals', {}, cursor, signal);
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 403)) throw err;
        oneAgent.current = true;
      }
    }
    setNeedsAgent(!agentId);
    if (!agentId) return { items: [], nextCursor: null };
    return getPage<Approval>(apiPath('agents', agentId, 'approvals'), {}, cursor, signal);
  });
  const { reload, hasMore, pages, update } = list;
  // Polled only while it is one page: a reload reads the first page, and would drop the pages read after it.
  const onePage = pages <= 1 && !hasMore;
  useEffect(() => {
    if (!onePage) return;
    const timer = setInterval(reload, REFRESH_MS);
    return () => clearInterval(timer);
  }, [reload, onePage]);
  // What was decided here stays out, also when a refresh comes before the server has recorded the decision.
  const [decidedIds, setDecidedIds] = useState<ReadonlySet<string>>(new Set());
  const decided = useCallback(
    (id: string) => {
      setDecidedIds((ids) => new Set(ids).add(id));
      update((items) => items.filter((i) => i.id !== id));
    },
    [update],
  );
  const items = list.items.filter((i) => !decidedIds.has(i.id));

  return (
    <section aria-labelledby="view-heading">
      <ViewHead title="Approvals" headingRef={headingRef} onRefresh={reload} loading={list.loading} />
      <ErrorAlert error={list.error} />
      {needsAgent ? (
        <p className="notice">
          This token sees one agent only: type its id in Agent above and press Enter to see what waits for it.
        </p>
      ) : items.length === 0 && !list.loading && !list.error ? (
        <p className="notice">Nothing is waiting for approval.</p>
      ) : null}
      {items.length === 0 && list.loading ? <p className="muted">Loading…</p> : null}
      <div className="cards">
        {items.map((item) => (
          <ApprovalItem key={`${item.kind}:${item.id}`} item={item} onDecided={decided} />
        ))}
      </div>
      <LoadMore list={list} />
    </section>
  );
}
