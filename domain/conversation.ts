import type { DeliverReplyInput, DeliveryOutcome } from './delivery';
import type { ToolResultBlock } from './model';
import type { MessageMode } from './messages';

export const CONVERSATION = {
  /**
   * A conversation with nothing to do (no queued message, no delegate out, no result to relay) closes its workflow
   * after this long; its next message starts a new run. An idle conversation then costs Temporal and the worker
   * nothing.
   */
  idleCloseMs: 5 * 60_000,
  /**
   * A conversation's workflow task timeout. A turn runs in one workflow task (its steps are local activities), and
   * the SDK extends a task that waits on a long step (a model call) at 80% of this: a message sent meanwhile (a steer,
   * an interrupt, a person's decision) reaches the workflow within that. Short, for that; far above a task's own work.
   */
  workflowTaskTimeout: '3 seconds',
} as const;

/** Where a turn is, or how it ended, as the API reports it. */
export const TURN_STATUSES = [
  'queued',
  'running',
  'replied',
  'skipped',
  'error',
  'interrupted',
  'budget_exhausted',
] as const;
export type TurnStatus = (typeof TURN_STATUSES)[number];
export type FinishedTurnStatus = Exclude<TurnStatus, 'queued' | 'running'>;

export function isFinished<T extends { status: TurnStatus }>(turn: T): turn is T & { status: FinishedTurnStatus } {
  return turn.status !== 'queued' && turn.status !== 'running';
}

export interface TurnError {
  code: 'model_request' | 'model_error' | 'reply_blocked' | 'max_model_calls' | 'interrupted' | 'budget_exhausted';
  message: string;
}

/**
 * What a turn ends with: committed by `finishTurn` (or with the turn's last reply, `deliverFinalReply`) before anyone
 * hears of it.
 */
export type TurnEnd =
  | { status: 'replied'; replySeq: number; delivery: DeliveryOutcome }
  | { status: 'skipped'; reason?: string }
  | { status: 'error'; error: TurnError }
  | { status: 'interrupted'; error: TurnError }
  /** A budget stopped the turn before a model call; the error names it (docs/spend.md). */
  | { status: 'budget_exhausted'; error: TurnError };

/** How a turn ends once its reply is sent (or its delivery has failed for good). */
export function repliedEnd(replySeq: number, delivery: DeliveryOutcome): TurnEnd {
  return { status: 'replied', replySeq, delivery };
}

/** What the end of a turn records beside a reply that ends it (finishTurn's other inputs). */
export interface FinalReply {
  modelCalls: number;
  /** A retrigger turn's relayed delegates (their relay is marked with the turn's end). */
  relayOf?: string[];
  /** A reply by the reply tool: its model call's earlier tool results, to which the reply's own is added. */
  toolResults?: ToolResults;
  /** The reply tool's call, whose result names the delivery's outcome. */
  replyToolUseId?: string;
}

/** A reply that ends its turn: its delivery, and what the turn's end records beside it. */
export type FinalReplyInput = DeliverReplyInput & FinalReply;

/** The result of the `submitMessage` Update. */
export interface SubmitResult {
  messageId: string;
  turnId: string;
  status: 'accepted' | 'queued';
  duplicate: boolean;
}

/** A message waiting for its turn; its text stays in PostgreSQL. */
export interface QueuedMessage {
  messageId: string;
  turnId: string;
  mode: MessageMode;
  /** The workflow told when this turn ends (a job's run waits for its turn that way). */
  notify?: string;
  /** Set for a retrigger turn: the delegates whose admitted results it relays (no inbound message). */
  retrigger?: string[];
}

/** Answer of the `state` query. */
export interface ConversationState {
  busy: boolean;
  currentTurnId?: string;
  queued: number;
  liveDelegates: string[];
  turnsCompleted: number;
}

/** The workflow's input; `carried` is the small state a continue-as-new hands to the next run. */
export interface ConversationInput {
  agentId: string;
  conversationId: string;
  /** How long the workflow stays open with nothing to do (CONVERSATION.idleCloseMs when absent). */
  idleMs?: number;
  carried?: {
    queue: QueuedMessage[];
    turnsCompleted: number;
    liveDelegates: string[];
    /** Admitted results waiting for their retrigger turn. */
    pendingResults: string[];
    /** Retrigger turns since the last user message. */
    retriggers: number;
  };
}

/** The tool results of one model call, appended as one `tool` message. */
export interface ToolResults {
  callIndex: number;
  results: ToolResultBlock[];
}

/** Keel's own note to the model (a blocked plain-text reply), after a model call. */
export interface TurnNote {
  callIndex: number;
  text: string;
}
