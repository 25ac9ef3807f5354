import { queryOptions } from '@tanstack/react-query';
import { answer, api } from './api';

/** The agent's tool servers with their tools and policies (the Tools view, a fork's tools). */
export const toolServersQuery = (agentId: string) =>
  queryOptions({
    queryKey: ['agents', agentId, 'tool-servers'],
    queryFn: ({ signal }) =>
      answer(api.GET('/v1/agents/{agentId}/tool-servers', { params: { path: { agentId } }, signal })),
    enabled: agentId !== '',
  });
