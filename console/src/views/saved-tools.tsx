import type { SavedTool } from '../api-types';
import { apiPath, get } from '../api';
import { ErrorAlert } from '../error-alert';
import { instant } from '../time';
import { useLoad } from '../use-load';

/** The tools an app's routines saved: each one's latest version, its purpose and its code. */
export function SavedTools({ agentId, appId }: { agentId: string; appId: string }) {
  const tools = useLoad(`${agentId}\n${appId}`, (signal) =>
    get<SavedTool[]>(apiPath('agents', agentId, 'apps', appId, 'tools'), signal),
  );
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
