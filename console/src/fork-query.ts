import { queryOptions } from '@tanstack/react-query';
import { answer, api, ApiError } from './api';
import type { Fork } from './api-types';

/**
 * What a conversation was forked from, or null when it is no fork: the API answers 404 then, which is no failure
 * here (most conversations are not forks).
 */
export const forkQuery = (agentId: string, conversationId: string) =>
  queryOptions({
    queryKey: ['agents', agentId, 'conversations', conversationId, 'fork'],
    queryFn: async ({ signal }): Promise<Fork | null> => {
      try {
        return await answer(
          api.GET('/v1/agents/{agentId}/conversations/{conversationId}/fork', {
            params: { path: { agentId, conversationId } },
            signal,
          }),
        );
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return null;
        throw err;
      }
    },
  });
