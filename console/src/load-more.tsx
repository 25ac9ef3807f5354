import type { PagedList } from './use-paged-list';

/** The end of a paged list: a button for the next page while there is one. */
export function LoadMore({ list }: { list: Pick<PagedList<unknown>, 'hasMore' | 'loading' | 'loadMore'> }) {
  if (!list.hasMore) return null;
  return (
    <button type="button" className="button" disabled={list.loading} onClick={list.loadMore}>
      {list.loading ? 'Loading…' : 'Load more'}
    </button>
  );
}
