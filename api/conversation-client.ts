import { isGrpcServiceError, ServiceError, WithStartWorkflowOperation, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, type Client } from '@temporalio/client';
import { status } from '@grpc/grpc-js';
import type { ConversationState, SubmitResult } from '../domain/conversation';
import { conversationWorkflowId } from '../domain/ids';
import type { InboundMessage } from '../domain/messages';
import { SA } from '../domain/search-attributes';
import { stateQuery, submitMessage, type conversationWorkflow } from '../workflows/conversation';
import { ApiError } from './errors';

/**
 * The API's side of a conversation: update-with-start delivers a message to the conversation's workflow, starting
 * it when this is the first message. The update id is the messageId, so Temporal also dedupes a retried request.
 */
export async function submitToConversation(
  client: Client,
  taskQueue: string,
  agentId: string,
  conversationId: string,
  message: InboundMessage,
  deadlineMs: number,
): Promise<SubmitResult> {
  const workflowId = conversationWorkflowId(agentId, conversationId);
  const start = new WithStartWorkflowOperation<typeof conversationWorkflow>('conversationWorkflow', {
    workflowId,
    taskQueue,
    args: [{ agentId, conversationId }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [
      { key: SA.agentId, value: agentId },
      { key: SA.conversationId, value: conversationId },
      { key: SA.kind, value: 'conversation' },
    ],
    memo: { agent: agentId, conversation: conversationId },
    staticSummary: `Conversation ${conversationId} of agent ${agentId}`,
  });
  try {
    // Bounded: with Temporal or every worker down the client gets a 503 to retry (the messageId keeps that safe).
    return await client.withDeadline(Date.now() + deadlineMs, () =>
      client.workflow.executeUpdateWithStart(submitMessage, { args: [message], updateId: `msg:${message.messageId}`, startWorkflowOperation: start }),
    );
  } catch (err) {
    // The Update validator refused the message: the same rules as the API's own schema, so this is rare.
    if (err instanceof WorkflowUpdateFailedError) throw new ApiError(400, 'invalid_message', err.cause?.message ?? err.message);
    if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError || (err instanceof ServiceError && isConnectionFailure(err))) {
      throw new ApiError(503, 'unavailable', 'Temporal or the Keel worker did not accept the message in time; retry with the same messageId', {
        messageId: message.messageId,
      });
    }
    throw err;
  }
}

/** Temporal could not be reached or did not answer in time, as opposed to refusing the request. */
function isConnectionFailure(err: ServiceError): boolean {
  const code = isGrpcServiceError(err.cause) ? err.cause.code : undefined;
  return code === status.UNAVAILABLE || code === status.DEADLINE_EXCEEDED || code === status.CANCELLED || code === undefined;
}

/** The workflow's own view of the conversation, or undefined when no worker answers in time. */
export async function queryConversationState(client: Client, agentId: string, conversationId: string, timeoutMs = 2_000): Promise<ConversationState | undefined> {
  const handle = client.workflow.getHandle(conversationWorkflowId(agentId, conversationId));
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      handle.query(stateQuery),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
      }),
    ]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
