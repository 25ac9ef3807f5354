import { useQuery, useQueryClient } from '@tanstack/react-query';
import { answer, api } from '../api';
import { AgentNeeded } from '../agent-needed';
import { ErrorAlert } from '../error-alert';
import type { ViewProps } from '../view-props';
import { MemoryCompare } from './memory-compare';
import { MemoryVersions } from './memory-versions';
import { ReflectionStateView } from './reflection-state';
import { ViewHead } from '../view-head';

/** An agent's memory: its versions, a diff between any two, rollback, and reflection's state. */
export function MemoryView({ agentId, headingRef }: ViewProps) {
  const versions = useQuery({
    queryKey: ['agents', agentId, 'memory', 'versions'],
    queryFn: ({ signal }) =>
      answer(api.GET('/v1/agents/{agentId}/memory/versions', { params: { path: { agentId } }, signal })),
    enabled: agentId !== '',
  });
  const queryClient = useQueryClient();
  // The versions (a version itself never changes) and reflection's state, which says what became of them.
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: ['agents', agentId, 'memory', 'versions'], exact: true }),
      queryClient.invalidateQueries({ queryKey: ['agents', agentId, 'reflection'] }),
    ]);
  return (
    <section aria-labelledby="view-heading">
      <ViewHead
        title="Memory"
        headingRef={headingRef}
        {...(agentId ? { onRefresh: () => void refresh() } : {})}
        loading={versions.isFetching}
      />
      {!agentId ? (
        <AgentNeeded what="memory" />
      ) : (
        <>
          <ErrorAlert error={versions.error} />
          {versions.isLoading ? <p className="muted">Loading…</p> : null}
          {versions.data?.length ? (
            <div className="columns">
              <MemoryVersions agentId={agentId} versions={versions.data} onRolledBack={refresh} />
              <div>
                <MemoryCompare agentId={agentId} versions={versions.data} />
                <ReflectionStateView agentId={agentId} />
              </div>
            </div>
          ) : null}
        </>
      )}
    </section>
  );
}
