/**
 * The conversation workflow as its callers see it: the API submits messages and reads its state, a job submits its
 * task, a delegate reports its committed outcome.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ConversationInput, ConversationState, QueuedMessage, SubmitResult } from '../domain/conversation';
import type { DelegateFinished } from '../domain/delegation';
import type { InboundMessage } from '../domain/messages';

export const CONVERSATION_WORKFLOW = 'conversationWorkflow';
/** The summary of the timer after which an idle conversation closes (Temporal UI shows it; tests recognise it). */
export const IDLE_TIMER_SUMMARY = 'close when idle';
export type ConversationWorkflow = (input: ConversationInput) => Promise<void>;

/**
 * An inbound message, by update-with-start, for runs begun before messageRecorded: the workflow recorded it itself.
 * Idempotent by messageId.
 */
export const submitMessage = defineUpdate<SubmitResult, [InboundMessage]>('submitMessage');
/**
 * A message Keel has recorded in PostgreSQL (services/conversation.ts), by signal-with-start: its turn to queue, steer
 * into the running turn or let interrupt it. Its text stays in PostgreSQL. Handed over again while its turn is open,
 * so the workflow takes a turn once.
 */
export const messageRecorded = defineSignal<[QueuedMessage]>('messageRecorded');
export const stateQuery = defineQuery<ConversationState>('state');
/** Sent by a delegate after its outcome is committed; only a claim: admission re-reads the committed row. */
export const delegateFinished = defineSignal<[DelegateFinished]>('delegateFinished');
