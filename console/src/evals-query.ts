import { queryOptions } from '@tanstack/react-query';
import { answer, api } from './api';

/** How often a running evaluation is read again: its cases finish one by one, and nothing announces them. */
const FOLLOW_MS = 1500;

/** Every evaluation read of the agent, for invalidateQueries. */
export const evalsKey = (agentId: string) => ['agents', agentId, 'evals'];

/** The agent's latest evaluations, newest first; read again while one of them runs. */
export const evalsQuery = (agentId: string) =>
  queryOptions({
    queryKey: [...evalsKey(agentId), 'list'],
    queryFn: ({ signal }) => answer(api.GET('/v1/agents/{agentId}/evals', { params: { path: { agentId } }, signal })),
    refetchInterval: (q) => (q.state.data?.items.some((e) => e.status === 'running') ? FOLLOW_MS : false),
    enabled: agentId !== '',
  });

/** An evaluation and its cases' verdicts; read again until it ends. */
export const evalQuery = (agentId: string, evalId: string) =>
  queryOptions({
    queryKey: [...evalsKey(agentId), evalId],
    queryFn: ({ signal }) =>
      answer(api.GET('/v1/agents/{agentId}/evals/{evalId}', { params: { path: { agentId, evalId } }, signal })),
    refetchInterval: (q) => (q.state.data?.status === 'running' ? FOLLOW_MS : false),
  });

/** One case side by side, recorded and candidate; read again until its verdict is in. */
export const evalCaseQuery = (agentId: string, evalId: string, caseId: string) =>
  queryOptions({
    queryKey: [...evalsKey(agentId), evalId, 'cases', caseId],
    queryFn: ({ signal }) =>
      answer(
        api.GET('/v1/agents/{agentId}/evals/{evalId}/cases/{caseId}', {
          params: { path: { agentId, evalId, caseId } },
          signal,
        }),
      ),
    refetchInterval: (q) => (q.state.data?.status === 'pending' ? FOLLOW_MS : false),
  });
