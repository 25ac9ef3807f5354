import { useQueryClient } from '@tanstack/react-query';
import { answer, api } from '../api';
import { EVERY_AGENTS_LIST } from '../agents-query';
import { ConfirmDialog } from '../confirm-dialog';
import { awaitDeletion } from '../deletion';
import { ErrorAlert } from '../error-alert';
import { useChange } from '../use-change';

/**
 * Deleting a conversation once a person has confirmed it: the request, then its deletion followed until it is done,
 * then the lists read again, all while the dialog waits. `conversationId` is the one asked about (null: none).
 */
export function ConversationDeletion({
  agentId,
  conversationId,
  onClose,
}: {
  agentId: string;
  conversationId: string | null;
  onClose: () => void;
}) {
  const queryClient = useQueryClient();
  const deletion = useChange({
    mutationFn: async (id: string) =>
      awaitDeletion(
        await answer(
          api.DELETE('/v1/agents/{agentId}/conversations/{conversationId}', {
            params: { path: { agentId, conversationId: id } },
          }),
        ),
      ),
    // The conversations (and its transcript) and the agents' counts.
    onSuccess: () =>
      Promise.all([
        queryClient.invalidateQueries({ queryKey: ['agents', agentId, 'conversations'] }),
        queryClient.invalidateQueries({ queryKey: EVERY_AGENTS_LIST }),
      ]),
    onSettled: onClose,
  });
  return (
    <>
      <ErrorAlert error={deletion.error} />
      <ConfirmDialog
        isOpen={conversationId !== null}
        title={`Delete conversation ${conversationId ?? ''}?`}
        confirmLabel="Confirm deletion"
        pendingText="Deleting…"
        tone="danger"
        pending={deletion.isPending}
        onConfirm={() => conversationId !== null && deletion.send(conversationId)}
        onCancel={onClose}
      >
        <p>
          Its workflow ends, and its transcript, messages and results are erased; this cannot be undone. The audit trail
          keeps who deleted it and when.
        </p>
      </ConfirmDialog>
    </>
  );
}
