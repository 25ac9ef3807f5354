import { useState } from 'react';
import type { MemoryVersion } from '../api-types';
import { apiPath, get } from '../api';
import { AgentNeeded } from '../agent-needed';
import { ErrorAlert } from '../error-alert';
import { useLoad } from '../use-load';
import type { ViewProps } from '../view-props';
import { MemoryCompare } from './memory-compare';
import { MemoryVersions } from './memory-versions';
import { ReflectionStateView } from './reflection-state';
import { ViewHead } from '../view-head';

/** An agent's memory: its versions, a diff between any two, rollback, and reflection's state. */
export function MemoryView({ agentId, headingRef }: ViewProps) {
  const [round, setRound] = useState(0);
  const versions = useLoad(
    agentId || null,
    (signal) => get<MemoryVersion[]>(apiPath('agents', agentId, 'memory', 'versions'), signal),
    round,
  );
  return (
    <section aria-labelledby="view-heading">
      <ViewHead
        title="Memory"
        headingRef={headingRef}
        {...(agentId ? { onRefresh: () => setRound((r) => r + 1) } : {})}
        loading={versions.loading}
      />
      {!agentId ? (
        <AgentNeeded what="memory" />
      ) : (
        <>
          <ErrorAlert error={versions.error} />
          {versions.loading && !versions.data ? <p className="muted">Loading…</p> : null}
          {versions.data?.length ? (
            <div className="columns">
              <MemoryVersions agentId={agentId} versions={versions.data} onRolledBack={() => setRound((r) => r + 1)} />
              <div>
                <MemoryCompare agentId={agentId} versions={versions.data} />
                <ReflectionStateView agentId={agentId} round={round} />
              </div>
            </div>
          ) : null}
        </>
      )}
    </section>
  );
}
