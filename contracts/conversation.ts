/**
 * The conversation workflow as its callers see it: the API submits messages and reads its state, a job submits its
 * task, a delegate reports its committed outcome.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ConversationInput, ConversationState, SubmitResult } from '../domain/conversation';
import type { DelegateFinished } from '../domain/delegation';
import type { SubmittedMessage } from '../domain/messages';

export const CONVERSATION_WORKFLOW = 'conversationWorkflow';
/** The summary of the timer after which an idle conversation closes (Temporal UI shows it; tests recognise it). */
export const IDLE_TIMER_SUMMARY = 'close when idle';
export type ConversationWorkflow = (input: ConversationInput) => Promise<void>;

/** An inbound message, recorded in PostgreSQL, by update-with-start; idempotent by messageId. */
export const submitMessage = defineUpdate<SubmitResult, [SubmittedMessage]>('submitMessage');
export const stateQuery = defineQuery<ConversationState>('state');
/** Sent by a delegate after its outcome is committed; only a claim: admission re-reads the committed row. */
export const delegateFinished = defineSignal<[DelegateFinished]>('delegateFinished');
