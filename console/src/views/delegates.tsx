import { useCallback, useId, useState } from 'react';
import { OUTCOME_KINDS, type Delegate } from '../api-types';
import { apiPath, getPage } from '../api';
import { AgentNeeded } from '../agent-needed';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { usePagedList } from '../use-paged-list';
import type { ViewProps } from '../view-props';
import { DelegateItem } from './delegate-item';
import { TaskBoard } from './task-board';
import { ViewHead } from '../view-head';

const STATUSES = ['live', 'completed', ...OUTCOME_KINDS] as const;

/** An agent's delegates, filtered by where they are or how they ended, and its task board. */
export function DelegatesView({ agentId, headingRef }: ViewProps) {
  const statusId = useId();
  const [status, setStatus] = useState('');
  const list = usePagedList<Delegate>(agentId ? `${agentId}\n${status}` : null, (cursor, signal) =>
    getPage(apiPath('agents', agentId, 'delegates'), { status, limit: 50 }, cursor, signal),
  );
  const { update } = list;
  const changed = useCallback(
    (d: Delegate) => update((items) => items.map((i) => (i.delegateId === d.delegateId ? d : i))),
    [update],
  );

  return (
    <section aria-labelledby="view-heading">
      <ViewHead
        title="Delegates"
        headingRef={headingRef}
        {...(agentId ? { onRefresh: list.reload } : {})}
        loading={list.loading}
      />
      {!agentId ? (
        <AgentNeeded what="delegates and tasks" />
      ) : (
        <>
          <div className="field inline">
            <label htmlFor={statusId}>Status</label>
            <select id={statusId} value={status} onChange={(e) => setStatus(e.target.value)}>
              <option value="">All</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </div>
          <ErrorAlert error={list.error} />
          {list.items.length === 0 && !list.loading && !list.error ? (
            <p className="notice">No delegates{status ? ` with status ${status}` : ''}.</p>
          ) : null}
          {list.items.length === 0 && list.loading ? <p className="muted">Loading…</p> : null}
          <div className="cards">
            {list.items.map((d) => (
              <DelegateItem key={d.delegateId} agentId={agentId} delegate={d} onChanged={changed} />
            ))}
          </div>
          <LoadMore list={list} />
          <TaskBoard agentId={agentId} />
        </>
      )}
    </section>
  );
}
