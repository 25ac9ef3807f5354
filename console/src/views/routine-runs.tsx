import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { instant } from '../time';
import { RunTimes } from './run-times';

/** A routine's runs, newest first: status, digest, the gate it waits at, the tool it used and its artifact. */
export function RoutineRuns({ agentId, appId, slug }: { agentId: string; appId: string; slug: string }) {
  const runs = useQuery({
    queryKey: ['agents', agentId, 'apps', appId, 'routines', slug, 'runs'],
    queryFn: ({ signal }) =>
      answer(
        api.GET('/v1/agents/{agentId}/apps/{appId}/routines/{slug}/runs', {
          params: { path: { agentId, appId, slug } },
          signal,
        }),
      ),
  });
  return (
    <>
      <ErrorAlert error={runs.error} />
      {runs.isLoading ? <p className="muted">Loading…</p> : null}
      {runs.data?.length === 0 ? <p className="notice">No runs yet.</p> : null}
      <ul className="compact">
        {runs.data?.map((r) => (
          <li key={r.runId}>
            <strong>{r.status}</strong>
            <RunTimes run={r} workflowId={r.workflowId} />
            {r.tool ? ` · tool ${r.tool.name} v${r.tool.version}` : ''}
            {r.tool?.authored ? ' (authored in this run)' : ''}
            {r.gate ? (
              <span className="text">
                {' '}
                · gate: {r.gate.capability}: {r.gate.detail}
              </span>
            ) : null}
            {r.decision ? (
              <span className="text">
                {' '}
                · {r.decision.approved ? 'approved' : 'rejected'}
                {r.decision.note ? `: ${r.decision.note}` : ''}
              </span>
            ) : null}
            {r.digest ? <span className="preview text">{r.digest}</span> : null}
            {r.artifactId ? <ArtifactView agentId={agentId} appId={appId} artifactId={r.artifactId} /> : null}
          </li>
        ))}
      </ul>
    </>
  );
}

/** A run's Markdown artifact, read when it is opened; shown as text. */
function ArtifactView({ agentId, appId, artifactId }: { agentId: string; appId: string; artifactId: string }) {
  const [open, setOpen] = useState(false);
  const artifact = useQuery({
    queryKey: ['agents', agentId, 'apps', appId, 'artifacts', artifactId],
    queryFn: ({ signal }) =>
      answer(
        api.GET('/v1/agents/{agentId}/apps/{appId}/artifacts/{artifactId}', {
          params: { path: { agentId, appId, artifactId } },
          signal,
        }),
      ),
    enabled: open,
  });
  return (
    <details onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>Artifact {artifactId}</summary>
      <ErrorAlert error={artifact.error} />
      {artifact.data ? (
        <>
          <p>
            <strong>{artifact.data.title}</strong> · {instant(artifact.data.createdAt)}
          </p>
          <pre className="text">{artifact.data.content}</pre>
        </>
      ) : null}
    </details>
  );
}
