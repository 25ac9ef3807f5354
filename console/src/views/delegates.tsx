import { useInfiniteQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import type { DelegateFilter } from '../api-types';
import { answer, api } from '../api';
import { AgentNeeded } from '../agent-needed';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { pagedQuery } from '../paged-query';
import type { ViewProps } from '../view-props';
import { DelegateItem } from './delegate-item';
import { TaskBoard } from './task-board';
import { ViewHead } from '../view-head';

/** The filter's choices: each status the route takes, and only those (a Record, so the type checks both ways). */
const CHOICES: Record<DelegateFilter, true> = {
  live: true,
  completed: true,
  success: true,
  partial: true,
  timeout: true,
  blocked: true,
  cancelled: true,
  failed: true,
};
const STATUSES = Object.keys(CHOICES) as DelegateFilter[];
const isFilter = (s: string): s is DelegateFilter => s in CHOICES;

/** An agent's delegates, filtered by where they are or how they ended, and its task board. */
export function DelegatesView({ agentId, headingRef }: ViewProps) {
  const statusId = useId();
  const [status, setStatus] = useState<DelegateFilter | ''>('');
  const list = useInfiniteQuery({
    ...pagedQuery(['agents', agentId, 'delegates', { status }], (cursor, signal) =>
      answer(
        api.GET('/v1/agents/{agentId}/delegates', {
          params: { path: { agentId }, query: { status: status || undefined, limit: 50, cursor } },
          signal,
        }),
      ),
    ),
    enabled: agentId !== '',
  });
  const items = list.data ?? [];

  return (
    <section aria-labelledby="view-heading">
      <ViewHead
        title="Delegates"
        headingRef={headingRef}
        {...(agentId ? { onRefresh: () => void list.refetch() } : {})}
        loading={list.isFetching}
      />
      {!agentId ? (
        <AgentNeeded what="delegates and tasks" />
      ) : (
        <>
          <div className="field inline">
            <label htmlFor={statusId}>Status</label>
            <select
              id={statusId}
              value={status}
              onChange={(e) => setStatus(isFilter(e.target.value) ? e.target.value : '')}
            >
              <option value="">All</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </div>
          <ErrorAlert error={list.error} />
          {items.length === 0 && list.isSuccess ? (
            <p className="notice">No delegates{status ? ` with status ${status}` : ''}.</p>
          ) : null}
          {list.isLoading ? <p className="muted">Loading…</p> : null}
          <div className="cards">
            {items.map((d) => (
              <DelegateItem key={d.delegateId} agentId={agentId} delegate={d} />
            ))}
          </div>
          <LoadMore list={list} />
          <TaskBoard agentId={agentId} />
        </>
      )}
    </section>
  );
}
