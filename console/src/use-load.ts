import { useCallback, useEffect, useState } from 'react';
import { messageOf } from './api';

export interface Loaded<T> {
  data: T | undefined;
  error: string | null;
  loading: boolean;
  /** Reads again; what is shown stays until the new answer comes. */
  reload: () => void;
  /** Replaces what is shown, e.g. with the answer of a change. */
  setData: (data: T) => void;
}

/**
 * Something read from the API for a view, read again when `key` changes (an agent, a filter: what is shown goes) or
 * `round` does (the same thing again: what is shown stays until the answer). An answer that comes after the key
 * changed is dropped, so a slow reply never shows under another agent's name. `null` reads nothing.
 */
export function useLoad<T>(key: string | null, load: (signal: AbortSignal) => Promise<T>, round = 0): Loaded<T> {
  const [state, setState] = useState<{ key: string | null; data?: T; error: string | null; loading: boolean }>({
    key: null,
    error: null,
    loading: key !== null,
  });
  const [reloads, setReloads] = useState(0);
  useEffect(() => {
    if (key === null) return;
    const abort = new AbortController();
    setState((s) => (s.key === key ? { ...s, loading: true } : { key, error: null, loading: true }));
    load(abort.signal).then(
      (data) => !abort.signal.aborted && setState({ key, data, error: null, loading: false }),
      (err: unknown) =>
        !abort.signal.aborted && setState((s) => ({ ...s, key, error: messageOf(err), loading: false })),
    );
    return () => abort.abort();
    // `load` is a new function each render; `key` says when what it reads changed.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, round, reloads]);
  const reload = useCallback(() => setReloads((r) => r + 1), []);
  const setData = useCallback((data: T) => setState((s) => ({ ...s, data, error: null })), []);
  const current = state.key === key;
  return {
    data: current ? state.data : undefined,
    error: current ? state.error : null,
    loading: key !== null && (!current || state.loading),
    reload,
    setData,
  };
}
