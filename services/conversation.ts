/**
 * What a caller of a conversation does, whether the API (a user's message) or a job's run (its task): submit a
 * message to the conversation's workflow, then wait for the turn that answers it. And the conversation as the API
 * reads it: the agent's conversations, and one's state and transcript.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { CONVERSATION_WORKFLOW, messageRecorded, type ConversationWorkflow } from '../contracts/conversation';
import {
  conversationExists,
  conversationStateFromDb,
  getTurnOfMessage,
  listMessages,
  openTurnsBefore,
  type TranscriptView,
  type TurnView,
} from '../db/conversations';
import type { Pool } from '../db/pool';
import {
  CONVERSATION,
  isFinished,
  type ConversationInput,
  type ConversationState,
  type FinishedTurnStatus,
  type QueuedMessage,
  type SubmitResult,
} from '../domain/conversation';
import { conversationWorkflowId } from '../domain/ids';
import type { InboundMessage } from '../domain/messages';
import { acceptMessage } from './conversation-turn';
import { transcriptToolCalls, type TranscriptToolCall } from './tool-results';
import { SA } from '../domain/search-attributes';

// A read the API serves as it is.
export { listConversations, type ConversationSummary } from '../db/conversations';

export interface ConversationAddress {
  agentId: string;
  conversationId: string;
  /** Where the conversation's workflow runs, if this message starts it. */
  taskQueue: string;
  /** The job whose runs are turns of this conversation, if any: operators find its workflow by it. */
  jobId?: string;
  /** How long the conversation's workflow stays open with nothing to do (KEEL_CONVERSATION_IDLE_MS). */
  idleMs?: number;
}

export type FinishedTurn = TurnView & { status: FinishedTurnStatus };

/**
 * The message is recorded in PostgreSQL once per messageId, under a turn id drawn here; then signal-with-start hands
 * its turn to the conversation's workflow, starting it when this is the first message. The signal is durable once
 * Temporal has it, and the workflow only places the turn (no step of its own, so that a turn's steps can run as
 * local activities: workflows/activities.ts). A message sent again is handed over again while its turn is open (the
 * first hand-over may never have arrived), and answered as a duplicate without one once the turn has ended.
 */
export async function submitToConversation(
  deps: { client: Client; pool: Pool },
  to: ConversationAddress,
  message: InboundMessage,
): Promise<SubmitResult> {
  const { client, pool } = deps;
  const { agentId, conversationId } = to;
  const conversationKey = conversationWorkflowId(agentId, conversationId);
  const { messageId, mode } = message;
  const accepted = await acceptMessage(
    { pool },
    { conversationKey, agentId, conversationId, message, turnId: randomUUID(), startsTurn: true },
  );
  const { turnId, duplicate } = accepted;
  const ahead = await openTurnsBefore(pool, conversationKey, turnId);
  if (ahead === undefined) return { messageId, turnId, status: 'accepted', duplicate: true };
  await client.workflow.signalWithStart<ConversationWorkflow, [QueuedMessage]>(CONVERSATION_WORKFLOW, {
    ...conversationStart(to),
    signal: messageRecorded,
    signalArgs: [{ messageId, turnId, mode, ...(message.notify ? { notify: message.notify } : {}) }],
  });
  // As the workflow places it: first in line, or steered into the running turn; else behind what is ahead of it.
  return { messageId, turnId, status: ahead === 0 || mode === 'steer' ? 'accepted' : 'queued', duplicate };
}

/** How a conversation's workflow starts, whoever starts it. */
function conversationStart(to: ConversationAddress) {
  const { agentId, conversationId, jobId } = to;
  return {
    workflowId: conversationWorkflowId(agentId, conversationId),
    taskQueue: to.taskQueue,
    workflowTaskTimeout: CONVERSATION.workflowTaskTimeout,
    args: [{ agentId, conversationId, ...(to.idleMs ? { idleMs: to.idleMs } : {}) }] as [ConversationInput],
    typedSearchAttributes: [
      { key: SA.agentId, value: agentId },
      { key: SA.conversationId, value: conversationId },
      { key: SA.kind, value: 'conversation' },
      ...(jobId ? [{ key: SA.jobId, value: jobId }] : []),
    ],
    memo: { agent: agentId, conversation: conversationId },
    staticSummary: `Conversation ${conversationId} of agent ${agentId}`,
  };
}

/**
 * Starts the conversation's workflow when none runs, with no message: it takes up what PostgreSQL holds for it. A
 * job's run hands it the delegates its turn left out, whose results come back to the conversation.
 */
export async function wakeConversation(client: Client, to: ConversationAddress): Promise<void> {
  await client.workflow.start<ConversationWorkflow>(CONVERSATION_WORKFLOW, {
    ...conversationStart(to),
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

/** The turn that answers the message, once it has finished (a steered message is answered by the turn it joined). */
export async function finishedTurnOf(
  pool: Pool,
  conversationKey: string,
  messageId: string,
): Promise<FinishedTurn | undefined> {
  const turn = await getTurnOfMessage(pool, conversationKey, messageId);
  return turn && isFinished(turn) ? turn : undefined;
}

/**
 * Waits for the turn that answers the message (a steered message's turn may change while it waits) to finish,
 * reading PostgreSQL once and again each time `sleep(pollMs)` returns: the finished turn, or what `stop` answered
 * when it gave a reason to stop first. `sleep` is the caller's own: a worker's sleeps for `pollMs` (an activity's
 * heartbeats and cancellation go with it); the API's returns when the conversation's NOTIFY says a turn ended, or
 * after `pollMs` in case one was lost, or at once when `stop` has a reason.
 */
export async function waitForTurnEnd<Stop = never>(
  pool: Pool,
  conversationKey: string,
  messageId: string,
  wait: { pollMs: number; stop?: () => Stop | undefined; sleep?: (ms: number) => Promise<void> },
): Promise<FinishedTurn | Stop> {
  const sleep = wait.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  for (;;) {
    const turn = await finishedTurnOf(pool, conversationKey, messageId);
    if (turn) return turn;
    let stopped = wait.stop?.();
    if (stopped === undefined) {
      await sleep(wait.pollMs);
      // A sleep cut short by a reason to stop answers with it, without another read.
      stopped = wait.stop?.();
    }
    if (stopped !== undefined) return stopped;
  }
}

/** What the API shows of a conversation's state. */
export type ConversationStateView = Pick<ConversationState, 'busy' | 'queued' | 'liveDelegates'>;

/**
 * A conversation's state and a page of its transcript (the messages after seq `afterSeq`); undefined when there is no
 * such conversation. The state is the workflow's own, asked by `liveState` while the transcript is read; when the
 * workflow does not answer, the state PostgreSQL holds, without live delegates.
 */
export async function conversationWithTranscript(
  pool: Pool,
  agentId: string,
  conversationId: string,
  page: { afterSeq: number; limit: number },
  liveState: () => Promise<ConversationStateView | undefined>,
): Promise<
  { state: ConversationStateView; messages: (TranscriptView & { toolCalls?: TranscriptToolCall[] })[] } | undefined
> {
  const key = conversationWorkflowId(agentId, conversationId);
  if (!(await conversationExists(pool, key))) return undefined;
  const [rows, live] = await Promise.all([listMessages(pool, key, page.afterSeq, page.limit), liveState()]);
  const state = live ?? { ...(await conversationStateFromDb(pool, key)), liveDelegates: [] };
  return { state, messages: await transcriptToolCalls(pool, key, rows) };
}
