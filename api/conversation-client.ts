import { QueryRejectedError, WorkflowClient, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { stateQuery } from '../contracts/conversation';
import type { Pool } from '../db/pool';
import type { ConversationState, SubmitResult } from '../domain/conversation';
import { FAILURE } from '../domain/failures';
import { conversationWorkflowId } from '../domain/ids';
import type { InboundMessage } from '../domain/messages';
import * as conversations from '../services/conversation';
import { temporalUnavailable } from '../services/temporal-status';
import { ApiError } from './errors';

/**
 * The API's side of a conversation: the message is recorded and goes to the conversation's workflow (signal-with-start,
 * idempotent by messageId) within the API's deadline, and what goes wrong is answered in the API's error shape.
 */
export async function submitToConversation(
  client: Client,
  pool: Pool,
  to: conversations.ConversationAddress,
  message: InboundMessage,
  deadlineMs: number,
): Promise<SubmitResult> {
  try {
    // Bounded: with Temporal or every worker down the client gets a 503 to retry (the messageId keeps that safe).
    return await client.withDeadline(Date.now() + deadlineMs, () =>
      conversations.submitToConversation({ client, pool }, to, message),
    );
  } catch (err) {
    // PostgreSQL refused to store it (the schema lets little through that it would refuse).
    if (err instanceof ApplicationFailure && err.type === FAILURE.invalidInput)
      throw new ApiError(400, 'invalid_message', err.message);
    if (temporalUnavailable(err)) {
      const why = 'Temporal or the Keel worker did not accept the message in time; retry with the same messageId';
      throw new ApiError(503, 'unavailable', why, { messageId: message.messageId });
    }
    throw err;
  }
}

/** What the API shows of a conversation's state. */
export type LiveState = Pick<ConversationState, 'busy' | 'queued' | 'liveDelegates'>;

/** A conversation whose workflow has closed (idle, or ended by an operator) runs nothing and holds nothing. */
const CLOSED_STATE: LiveState = { busy: false, queued: 0, liveDelegates: [] };

/**
 * The same client's queries, refused by Temporal itself when the workflow is closed: a closed workflow is otherwise
 * answered by a worker replaying its whole history.
 */
const openOnly = new WeakMap<Client, WorkflowClient>();
function openOnlyQueries(client: Client): WorkflowClient {
  let workflows = openOnly.get(client);
  if (!workflows) {
    workflows = new WorkflowClient({ ...client.workflow.options, queryRejectCondition: 'NOT_OPEN' });
    openOnly.set(client, workflows);
  }
  return workflows;
}

/**
 * The workflow's own view of the conversation; the closed state when its workflow is closed; undefined when no worker
 * answers in time.
 */
export async function queryConversationState(
  client: Client,
  agentId: string,
  conversationId: string,
  timeoutMs = 2_000,
): Promise<LiveState | undefined> {
  const handle = openOnlyQueries(client).getHandle(conversationWorkflowId(agentId, conversationId));
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      handle.query(stateQuery),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
      }),
    ]);
  } catch (err) {
    if (err instanceof QueryRejectedError) return CLOSED_STATE;
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
