import { QueryClient } from '@tanstack/react-query';
import { ApiError } from './api';

/** A read that failed for a reason a retry will not change: the API refused it (4xx). */
const refused = (err: unknown) => err instanceof ApiError && err.status >= 400 && err.status < 500;

/**
 * The console's cache of what it read from the API (TanStack Query). A read that failed on the way (no answer, a 5xx)
 * is tried twice more before its error shows; one the API refused is not. A write is sent once.
 */
export const queryClient = new QueryClient({
  defaultOptions: {
    queries: { retry: (failures, err) => !refused(err) && failures < 2 },
    mutations: { retry: false },
  },
});
