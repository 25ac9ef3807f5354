import { useQuery } from '@tanstack/react-query';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { instant } from '../time';

/** The tools an app's routines saved: each one's latest version, its purpose and its code. */
export function SavedTools({ agentId, appId }: { agentId: string; appId: string }) {
  const tools = useQuery({
    queryKey: ['agents', agentId, 'apps', appId, 'tools'],
    queryFn: ({ signal }) =>
      answer(api.GET('/v1/agents/{agentId}/apps/{appId}/tools', { params: { path: { agentId, appId } }, signal })),
  });
  return (
    <section aria-labelledby="saved-tools-heading">
      <h4 id="saved-tools-heading">Saved tools</h4>
      <ErrorAlert error={tools.error} />
      {tools.data?.length === 0 ? <p className="notice">No saved tools.</p> : null}
      {tools.data?.map((t) => (
        <details key={t.name} className="tool">
          <summary>
            {t.name} v{t.version}: {t.title}
          </summary>
          <p className="text">{t.purpose}</p>
          <p className="meta">
            <span>inputs: {t.inputs.join(', ') || 'none'}</span>
            <span>by {t.authoredBy}</span>
            <span>{instant(t.createdAt)}</span>
          </p>
          <pre className="code">{t.code}</pre>
        </details>
      ))}
    </section>
  );
}
