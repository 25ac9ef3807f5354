/**
 * A tool server's tool called from a workflow (a conversation's turn, a delegate), as the workflow and its callers
 * share it: what the activities take, and the Update by which a person's decision reaches the waiting workflow.
 */
import { defineUpdate } from '@temporalio/workflow';
import type { ToolResultBlock, ToolUseBlock } from '../domain/model';
import type { PreparedToolCall, ToolCallDecision, ToolCallOrigin } from '../domain/tool-calls';
import { toolResult } from '../domain/transcript';

/** Where a call comes from; the key of its transcript and turn make its idempotency key. */
export interface ToolCallSource {
  agentId: string;
  origin: ToolCallOrigin;
  /** The transcript the call's model step is in: the conversation's key, or the delegate's workflow id. */
  transcriptKey: string;
  /** The conversation the call belongs to (a delegate's parent conversation). */
  conversationKey: string;
  /** The turn (a delegate's id for a delegate). */
  turnId: string;
  callIndex: number;
  delegateId?: string;
}

export interface PrepareToolCallInput extends ToolCallSource {
  toolUse: ToolUseBlock;
  /** The workflow a person's decision is sent to. */
  workflowId: string;
}

export interface RunToolCallInput {
  callId: string;
}

export interface OpenToolCallApprovalInput {
  callId: string;
}

export interface SettleToolCallInput {
  callId: string;
  decision: ToolCallDecision | null;
  /** Why a waiting call ends without running, when it does. */
  refusal?: { kind: 'expired'; waitedMs: number } | { kind: 'cancelled'; reason: string };
}

/** The result as the model step's transcript keeps it: whole, or a preview and a reference when it is large. */
export interface ToolCallResult {
  content: string;
  isError: boolean;
  /** Set when the whole result is kept in PostgreSQL under this call's id. */
  ref?: string;
}

/**
 * A call prepared and, when its policy lets it run at once, run in the same step (a turn in one workflow task): its
 * result with how it ran, or what prepareToolCall answered.
 */
export type ToolCallAttempt =
  { kind: 'ran'; how: string; result: ToolCallResult } | Exclude<PreparedToolCall, { kind: 'run' }>;

/**
 * The tool servers' calls a turn's model step prepared, and ran where their policy let them run, by tool_use id
 * (EFFECTS_IN_MODEL_STEP_PATCH): the workflow takes these instead of a step of their own.
 */
export type ToolAttempts = Record<string, ToolCallAttempt>;

/** A call that needs nothing more: it ran, or it was answered instead of running (denied, unknown, refused). */
export type SettledAttempt = Extract<ToolCallAttempt, { kind: 'ran' | 'answer' }>;

export const isSettled = (attempt: ToolCallAttempt): attempt is SettledAttempt =>
  attempt.kind === 'ran' || attempt.kind === 'answer';

/** What the model reads of a settled call: the workflow and the model step read attempts alike. */
export function attemptResult(toolUseId: string, attempt: SettledAttempt): ToolResultBlock {
  if (attempt.kind === 'answer') return toolResult(toolUseId, attempt.content, true);
  const { content, isError, ref } = attempt.result;
  return toolResult(toolUseId, content, isError, ref);
}

/** A person's decision on a call that waits; the Update fails when no such call waits with these arguments. */
export const decideToolCall = defineUpdate<{ approved: boolean }, [ToolCallDecision]>('decideToolCall');
