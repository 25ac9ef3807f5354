import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { go } from '../routes';
import { useChange } from '../use-change';

/**
 * Forks the conversation at a finished turn (1-based), the agent as it is, and opens the fork: a sandbox that holds
 * turns 1 to `atTurn` and goes on from there, its tool calls dry runs. The original is only read.
 */
export function ForkButton(props: { agentId: string; conversationId: string; atTurn: number }) {
  const { agentId, conversationId, atTurn } = props;
  const fork = useChange({
    mutationFn: () =>
      answer(
        api.POST('/v1/agents/{agentId}/conversations/{conversationId}/forks', {
          params: { path: { agentId, conversationId } },
          body: { atTurn },
        }),
      ),
    onSuccess: (made) => {
      go({ view: 'conversation', agentId, conversationId: made.conversationId });
    },
  });
  return (
    <div className="turn-actions">
      <button
        type="button"
        className="button"
        // Named with its turn, so that the buttons of a transcript are told apart in a list of controls.
        aria-label={`Fork from here, at turn ${atTurn}`}
        disabled={fork.isPending}
        onClick={() => fork.send()}
      >
        Fork from here
      </button>
      {fork.isPending ? <span className="muted">Forking…</span> : null}
      <ErrorAlert error={fork.error} />
    </div>
  );
}
