import { useCallback, useEffect, useRef, useState } from 'react';
import type { Page } from './api-types';
import { messageOf } from './api';

export interface PagedList<T> {
  items: T[];
  /** More pages after these. */
  hasMore: boolean;
  /** How many pages are shown. */
  pages: number;
  loading: boolean;
  error: string | null;
  loadMore: () => void;
  /** Reads the first page again (what is shown stays until it comes). */
  reload: () => void;
  /** Changes what is shown without asking the API, e.g. to drop an item that was decided. */
  update: (change: (items: T[]) => T[]) => void;
}

/**
 * A list the API pages with `{items, nextCursor}`, read again from its first page when `key` changes. Answers for an
 * earlier key, or an earlier reload, are dropped.
 */
export function usePagedList<T>(
  key: string | null,
  fetchPage: (cursor: string | null, signal: AbortSignal) => Promise<Page<T>>,
): PagedList<T> {
  const [items, setItems] = useState<T[]>([]);
  const [nextCursor, setNextCursor] = useState<string | null>(null);
  const [pages, setPages] = useState(0);
  const [loading, setLoading] = useState(key !== null);
  const [error, setError] = useState<string | null>(null);
  const generation = useRef(0);
  const abort = useRef<AbortController | null>(null);
  const fetchRef = useRef(fetchPage);
  fetchRef.current = fetchPage;

  const load = useCallback((cursor: string | null, fresh: boolean) => {
    if (fresh) generation.current++;
    const mine = generation.current;
    abort.current?.abort();
    const controller = new AbortController();
    abort.current = controller;
    setLoading(true);
    fetchRef.current(cursor, controller.signal).then(
      (page) => {
        if (mine !== generation.current || controller.signal.aborted) return;
        setItems((shown) => (cursor === null ? page.items : [...shown, ...page.items]));
        setNextCursor(page.nextCursor);
        setPages((n) => (cursor === null ? 1 : n + 1));
        setError(null);
        setLoading(false);
      },
      (err: unknown) => {
        if (mine !== generation.current || controller.signal.aborted) return;
        setError(messageOf(err));
        setLoading(false);
      },
    );
  }, []);

  useEffect(() => {
    setItems([]);
    setNextCursor(null);
    setPages(0);
    setError(null);
    if (key === null) {
      generation.current++;
      abort.current?.abort();
      setLoading(false);
      return;
    }
    load(null, true);
    return () => abort.current?.abort();
  }, [key, load]);

  return {
    items,
    hasMore: nextCursor !== null,
    pages,
    loading,
    error,
    loadMore: useCallback(() => nextCursor !== null && load(nextCursor, false), [load, nextCursor]),
    reload: useCallback(() => key !== null && load(null, true), [key, load]),
    update: useCallback((change: (items: T[]) => T[]) => setItems(change), []),
  };
}
