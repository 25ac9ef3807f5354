/** The delegate workflow as its callers see it: the conversation starts and cancels it, so does the API. */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { CommittedOutcome, LiveLifecycle } from '../domain/delegation';

export const DELEGATE_WORKFLOW = 'delegateWorkflow';

export interface DelegateInput {
  agentId: string;
  delegateId: string;
  /** The conversation's workflow id: the delegate signals it by id, so the parent's continue-as-new loses nothing. */
  conversationKey: string;
  taskNumber: number | null;
  wallClockSeconds: number;
}

/** It returns the outcome committed for it (its own, or that of whoever committed first). */
export type DelegateWorkflow = (input: DelegateInput) => Promise<CommittedOutcome>;

export const cancelDelegate = defineSignal<[{ reason: string }]>('cancelDelegate');
export const delegateStateQuery = defineQuery<{ lifecycle: LiveLifecycle; modelCalls: number }>('state');
