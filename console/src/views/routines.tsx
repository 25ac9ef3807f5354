import { useCallback, useId, useState } from 'react';
import type { Routine } from '../api-types';
import { apiPath, getPage } from '../api';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { usePagedList } from '../use-paged-list';
import { RoutineItem } from './routine-item';
import { SavedTools } from './saved-tools';

/** The routines of one app, named in the App field, with the tools they saved. */
export function RoutinesSection({ agentId }: { agentId: string }) {
  const appFieldId = useId();
  const [typed, setTyped] = useState('');
  const [appId, setAppId] = useState('');
  const list = usePagedList<Routine>(appId ? `${agentId}\n${appId}` : null, (cursor, signal) =>
    getPage(apiPath('agents', agentId, 'apps', appId, 'routines'), {}, cursor, signal),
  );
  const { update } = list;
  const changed = useCallback(
    (r: Routine) => update((items) => items.map((i) => (i.slug === r.slug ? r : i))),
    [update],
  );
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
          {list.items.length === 0 && !list.loading && !list.error ? (
            <p className="notice">App {appId} has no routines.</p>
          ) : null}
          {list.items.length === 0 && list.loading ? <p className="muted">Loading…</p> : null}
          <div className="cards">
            {list.items.map((r) => (
              <RoutineItem key={r.slug} agentId={agentId} routine={r} onChanged={changed} />
            ))}
          </div>
          <LoadMore list={list} />
          <SavedTools agentId={agentId} appId={appId} />
        </>
      )}
    </section>
  );
}
