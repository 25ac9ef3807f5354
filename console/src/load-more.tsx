/** The end of a paged list (useInfiniteQuery): a button for the next page while there is one. */
export function LoadMore({
  list,
}: {
  list: { hasNextPage: boolean; isFetching: boolean; isFetchingNextPage: boolean; fetchNextPage: () => unknown };
}) {
  if (!list.hasNextPage) return null;
  return (
    <button type="button" className="button" disabled={list.isFetching} onClick={() => void list.fetchNextPage()}>
      {list.isFetchingNextPage ? 'Loading…' : 'Load more'}
    </button>
  );
}
