/**
 * Reflection's queue of turn summaries as its workflow keeps it. Free of schemas, so that the workflow bundle holds
 * none (issue 27); the proposal's schema and the prompts are in reflection.ts.
 */
import type { FinishedTurnStatus } from './conversation';

/** Phantom's reflection numbers, kept. */
export const REFLECTION = {
  drainEveryMs: 180 * 60_000,
  drainAtQueued: 5,
  /** Hard-gate failures after which a conversation's summary goes to the poison list. */
  poisonAfterFailures: 3,
  maxEscalations: 2,
  /** Summaries one drain reads at most; the rest wait for the next drain. */
  maxBatch: 20,
  gateFirstUserChars: 240,
  gateLastReplyChars: 400,
} as const;

/** After each turn of a user conversation: the turn by reference, never its text. */
export interface TurnSummary {
  conversationId: string;
  fromSeq: number;
  toSeq: number;
  outcome: FinishedTurnStatus;
  /** Replies of the turn that were error replies (a failed turn counts one). */
  errorReplies: number;
  turnId: string;
}

/** A queued summary: the latest one per conversation wins; failures count hard-gate rejections of it. */
export interface QueuedSummary extends TurnSummary {
  failures: number;
}

/**
 * Enqueue: the summary replaces an earlier one of the same conversation, keeping its failure count and reaching back
 * to the earlier one's first message, so that no turn of the conversation goes unread.
 */
export function enqueue(queue: readonly QueuedSummary[], s: TurnSummary): QueuedSummary[] {
  const earlier = queue.find((q) => q.conversationId === s.conversationId);
  return [
    ...queue.filter((q) => q.conversationId !== s.conversationId),
    { ...s, fromSeq: Math.min(s.fromSeq, earlier?.fromSeq ?? s.fromSeq), failures: earlier?.failures ?? 0 },
  ];
}
