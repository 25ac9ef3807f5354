import { infiniteQueryOptions, type InfiniteData, type QueryKey } from '@tanstack/react-query';

/** What a paged list of the API answers (api/pagination.ts): a page of items, and the cursor of the next or null. */
interface Paged {
  items: unknown[];
  nextCursor: string | null;
}

/** Every page's items in order; one function, so that TanStack Query keeps the result while the pages stay. */
const allItems = <P extends Paged>(data: InfiniteData<P, string | undefined>): P['items'] =>
  data.pages.flatMap((page) => page.items);

/**
 * A list the API pages, for useInfiniteQuery: the first page, then each next one asked with the `nextCursor` of the
 * one before (Load more). Its data is the items of every page read.
 */
export function pagedQuery<P extends Paged>(
  queryKey: QueryKey,
  readPage: (cursor: string | undefined, signal: AbortSignal) => Promise<P>,
) {
  return infiniteQueryOptions({
    queryKey,
    queryFn: ({ pageParam, signal }) => readPage(pageParam, signal),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => page.nextCursor ?? undefined,
    select: allItems<P>,
  });
}
