import type { DelegateFinished, OutcomeKind, TerminalOwner } from './delegation';

/** What admission made of one completion signal (or reconciled outcome); every decision is recorded. */
export type AdmissionDecision =
  | 'admitted'
  | 'ignored:consumed'
  | 'rejected:not_committed'
  | 'rejected:other_conversation'
  | 'rejected:mismatch'
  | 'rejected:unknown';

/** The delegate's durable row, as admission re-reads it. */
export interface OutcomeRow {
  conversationKey: string;
  /** The outcome is committed: the row is complete and its outcome version counts from 1. */
  committed: boolean;
  outcomeKind: OutcomeKind | null;
  outcomeVersion: number;
  transcriptVersion: number;
  terminalOwner: TerminalOwner | null;
  /** The outcome version the conversation has already admitted (0 for none). */
  admittedVersion: number;
}

/**
 * Whether a delegate's outcome enters its conversation: the row must belong to that conversation and be committed,
 * a version already consumed is ignored, and the claim's four fields must match the row (never trust the signal).
 */
export function admissionDecision(
  conversationKey: string,
  claim: DelegateFinished,
  row: OutcomeRow | undefined,
): AdmissionDecision {
  if (!row) return 'rejected:unknown';
  if (row.conversationKey !== conversationKey) return 'rejected:other_conversation';
  if (!row.committed) return 'rejected:not_committed';
  if (claim.outcomeVersion <= row.admittedVersion) return 'ignored:consumed';
  const matches =
    row.outcomeVersion === claim.outcomeVersion &&
    row.transcriptVersion === claim.transcriptVersion &&
    row.outcomeKind === claim.outcomeKind &&
    row.terminalOwner === claim.terminalOwner;
  return matches ? 'admitted' : 'rejected:mismatch';
}
