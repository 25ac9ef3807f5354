import { useQueryClient, type QueryKey } from '@tanstack/react-query';
import { ErrorAlert } from '../error-alert';
import { useChange } from '../use-change';

export type Lifecycle = 'pause' | 'resume' | 'run';

/**
 * Pause (while active) or Resume, and Run now, of a job or routine, through the same routes as curl (`send`). What
 * `changes` names is read again after each, before the buttons take another press.
 */
export function LifecycleButtons({
  status,
  send,
  changes,
}: {
  status: string;
  send: (verb: Lifecycle) => Promise<unknown>;
  changes: QueryKey;
}) {
  const queryClient = useQueryClient();
  const action = useChange({
    mutationFn: send,
    onSuccess: () => queryClient.invalidateQueries({ queryKey: changes }),
  });
  return (
    <>
      <div className="actions">
        {status === 'active' ? (
          <button type="button" className="button" disabled={action.isPending} onClick={() => action.send('pause')}>
            Pause
          </button>
        ) : (
          <button type="button" className="button" disabled={action.isPending} onClick={() => action.send('resume')}>
            Resume
          </button>
        )}
        <button type="button" className="button" disabled={action.isPending} onClick={() => action.send('run')}>
          Run now
        </button>
      </div>
      <ErrorAlert error={action.error} />
    </>
  );
}
