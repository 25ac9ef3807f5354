/**
 * What a caller of a conversation does, whether the API (a user's message) or a job's run (its task): submit a
 * message to the conversation's workflow, then wait for the turn that answers it.
 */
import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import { CONVERSATION_WORKFLOW, submitMessage, type ConversationWorkflow } from '../contracts/conversation';
import { getTurn, turnOfMessage, type TurnView } from '../db/conversations';
import type { Pool } from '../db/pool';
import { isFinished, type FinishedTurnStatus, type SubmitResult } from '../domain/conversation';
import { conversationWorkflowId, submitMessageUpdateId } from '../domain/ids';
import type { InboundMessage } from '../domain/messages';
import { SA } from '../domain/search-attributes';

export interface ConversationAddress {
  agentId: string;
  conversationId: string;
  /** Where the conversation's workflow runs, if this message starts it. */
  taskQueue: string;
  /** The job whose runs are turns of this conversation, if any: operators find its workflow by it. */
  jobId?: string;
}

export type FinishedTurn = TurnView & { status: FinishedTurnStatus };

/**
 * Update-with-start delivers a message to the conversation's workflow, starting it when this is the first message.
 * The update id comes from the messageId, so Temporal dedupes a retried submission too.
 */
export async function submitToConversation(
  client: Client,
  to: ConversationAddress,
  message: InboundMessage,
): Promise<SubmitResult> {
  const { agentId, conversationId, jobId } = to;
  const start = new WithStartWorkflowOperation<ConversationWorkflow>(CONVERSATION_WORKFLOW, {
    workflowId: conversationWorkflowId(agentId, conversationId),
    taskQueue: to.taskQueue,
    args: [{ agentId, conversationId }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [
      { key: SA.agentId, value: agentId },
      { key: SA.conversationId, value: conversationId },
      { key: SA.kind, value: 'conversation' },
      ...(jobId ? [{ key: SA.jobId, value: jobId }] : []),
    ],
    memo: { agent: agentId, conversation: conversationId },
    staticSummary: `Conversation ${conversationId} of agent ${agentId}`,
  });
  return client.workflow.executeUpdateWithStart(submitMessage, {
    args: [message],
    updateId: submitMessageUpdateId(message.messageId),
    startWorkflowOperation: start,
  });
}

/**
 * Waits for the turn that answers the message (a steered message's turn may change while it waits) to finish, by
 * reading PostgreSQL every `pollMs`: the finished turn, or what `stop` answered when it gave a reason to stop first.
 * `sleep` is the caller's own (an activity's heartbeats and cancellation go with it).
 */
export async function waitForTurnEnd<Stop = never>(
  pool: Pool,
  conversationKey: string,
  messageId: string,
  wait: { pollMs: number; stop?: () => Stop | undefined; sleep?: (ms: number) => Promise<void> },
): Promise<FinishedTurn | Stop> {
  const sleep = wait.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  for (;;) {
    const turnId = await turnOfMessage(pool, conversationKey, messageId);
    const turn = turnId ? await getTurn(pool, conversationKey, turnId) : undefined;
    if (turn && isFinished(turn)) return turn;
    const stopped = wait.stop?.();
    if (stopped !== undefined) return stopped;
    await sleep(wait.pollMs);
  }
}
