import { answer, api } from './api';
import { pagedQuery } from './paged-query';

/** The agents the token may see whose id or name contains `q` (all of them for none), by id, a page at a time. */
export const agentsQuery = (q: string) =>
  pagedQuery(['agents', { q }], (cursor, signal) =>
    answer(api.GET('/v1/agents', { params: { query: { q, limit: 50, cursor } }, signal })),
  );

/**
 * Every list of agents, whatever its search, for invalidateQueries: a key's object matches any object, and no
 * agent's own keys (['agents', agentId, …]), which hold a string there.
 */
export const EVERY_AGENTS_LIST = ['agents', {}];
