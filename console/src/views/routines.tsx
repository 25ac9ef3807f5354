import { useInfiniteQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { pagedQuery } from '../paged-query';
import { RoutineItem } from './routine-item';
import { SavedTools } from './saved-tools';

/** The routines of one app, named in the App field, with the tools they saved. */
export function RoutinesSection({ agentId }: { agentId: string }) {
  const appFieldId = useId();
  const [typed, setTyped] = useState('');
  const [appId, setAppId] = useState('');
  const list = useInfiniteQuery({
    ...pagedQuery(['agents', agentId, 'apps', appId, 'routines'], (cursor, signal) =>
      answer(
        api.GET('/v1/agents/{agentId}/apps/{appId}/routines', {
          params: { path: { agentId, appId }, query: { cursor } },
          signal,
        }),
      ),
    ),
    enabled: appId !== '',
  });
  const items = list.data ?? [];
  return (
    <section aria-labelledby="routines-heading">
      <h3 id="routines-heading">Routines</h3>
      <form
        className="field inline"
        onSubmit={(e) => {
          e.preventDefault();
          setAppId(typed.trim());
        }}
      >
        <label htmlFor={appFieldId}>App</label>
        <input
          id={appFieldId}
          value={typed}
          onChange={(e) => setTyped(e.target.value)}
          onBlur={() => setAppId(typed.trim())}
          placeholder="app id, then Enter"
          autoComplete="off"
          spellCheck={false}
        />
      </form>
      {!appId ? (
        <p className="notice">Type an app id in App and press Enter to see its routines.</p>
      ) : (
        <>
          <ErrorAlert error={list.error} />
          {items.length === 0 && list.isSuccess ? <p className="notice">App {appId} has no routines.</p> : null}
          {list.isLoading ? <p className="muted">Loading…</p> : null}
          <div className="cards">
            {items.map((r) => (
              <RoutineItem key={r.slug} agentId={agentId} routine={r} />
            ))}
          </div>
          <LoadMore list={list} />
          <SavedTools agentId={agentId} appId={appId} />
        </>
      )}
    </section>
  );
}
