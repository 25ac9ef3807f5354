import { post } from '../api';
import { ErrorAlert } from '../error-alert';
import { useAction } from '../use-action';

/**
 * Pause (while active) or Resume, and Run now, of a job or routine, through the same routes as curl. `onChanged`
 * hears the item as a pause or resume left it; `onRan` that a run was started.
 */
export function LifecycleButtons<T>({
  path,
  status,
  onChanged,
  onRan,
}: {
  path: string;
  status: string;
  onChanged: (item: T) => void;
  onRan: () => void;
}) {
  const action = useAction();
  const act = (verb: 'pause' | 'resume' | 'run') =>
    void action.run(async () => {
      const answer = await post<T>(`${path}/${verb}`);
      if (verb === 'run') onRan();
      else onChanged(answer);
    });
  return (
    <>
      <div className="actions">
        {status === 'active' ? (
          <button type="button" className="button" disabled={action.pending} onClick={() => act('pause')}>
            Pause
          </button>
        ) : (
          <button type="button" className="button" disabled={action.pending} onClick={() => act('resume')}>
            Resume
          </button>
        )}
        <button type="button" className="button" disabled={action.pending} onClick={() => act('run')}>
          Run now
        </button>
      </div>
      <ErrorAlert error={action.error} />
    </>
  );
}
