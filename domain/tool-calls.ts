/**
 * Calls of a tool server's tools: their record's states, the limits on what a result costs the history and the model,
 * and the words the model reads when a call does not run. Pure, shared by the services and the workflows.
 */
import type { ToolPolicy } from './tool-servers';

/**
 * A call's record: prepared (its approval not yet open), waiting for a person, decided, sent, or ended. `unknown`:
 * it was sent and no answer came back (a timeout, a dropped connection), and it may not be sent again, so a person
 * has to look.
 */
export type ToolCallStatus =
  | 'prepared'
  | 'awaiting_approval'
  | 'approved'
  | 'running'
  | 'ok'
  | 'error'
  | 'unknown'
  | 'rejected'
  | 'expired'
  | 'cancelled'
  | 'denied';

export const TOOL_CALL_STATUSES: readonly ToolCallStatus[] = [
  'prepared',
  'awaiting_approval',
  'approved',
  'running',
  'ok',
  'error',
  'unknown',
  'rejected',
  'expired',
  'cancelled',
  'denied',
];

/** What asked for the call: a conversation's turn, or a delegate. */
export type ToolCallOrigin = 'conversation' | 'delegate';

export const TOOL_CALLS = {
  /** A result over this many UTF-8 bytes is kept in PostgreSQL; the history carries a reference and a preview. */
  inlineResultBytes: 16 * 1024,
  /** The preview a history carries of a result kept by reference. */
  previewChars: 1_000,
  /** The most of one result the model reads (about 25k tokens); past it the model reads a notice of the cut. */
  modelResultChars: 100_000,
  /** Attempts of a call's step: a call never sent, or one whose tool says a repeat is harmless, is tried again. */
  attempts: 5,
  /** How long one call may take before its outcome is unknown. */
  callTimeoutMs: 60_000,
  /** How long a call that waits for a person waits (KEEL_TOOL_APPROVAL_WAIT overrides it). */
  approvalWaitMs: 24 * 3_600_000,
} as const;

/** The `_meta` key that carries a call's idempotency key to the server. */
export const IDEMPOTENCY_META_KEY = 'io.keel/idempotency-key';

/** How a prepared call goes on: it runs, it waits for a person, or it is answered at once (denied, unknown tool). */
export type PreparedToolCall =
  | { kind: 'run'; callId: string; policy: ToolPolicy; label: string }
  | { kind: 'approve'; callId: string; argsDigest: string; label: string }
  | { kind: 'answer'; content: string; isError: true };

/** A person's decision on a call that waits, bound to the exact arguments it was shown with. */
export interface ToolCallDecision {
  callId: string;
  argsDigest: string;
  approved: boolean;
  note?: string;
  actor: string;
}

/** How a wait for a person ended without an approval. */
export type ToolCallRefusal =
  { kind: 'rejected'; note?: string } | { kind: 'expired'; waitedMs: number } | { kind: 'cancelled'; reason: string };

/** What the model reads when a call that waited for a person does not run. */
export function refusalForModel(label: string, r: ToolCallRefusal): string {
  switch (r.kind) {
    case 'rejected':
      return `${label} was rejected by a person, so it did not run${r.note ? `: ${r.note}` : ''}`;
    case 'expired':
      return `${label} was not approved within ${Math.round(r.waitedMs / 60_000)} min, so it expired and did not run`;
    case 'cancelled':
      return `${label} did not run: ${r.reason}`;
  }
}

/** A result kept by reference: what the history and the transcript carry instead of the whole text. */
export function resultPreview(text: string, callId: string, bytes: number): string {
  const preview = text.slice(0, TOOL_CALLS.previewChars);
  return `${preview}\n[… the whole result is ${bytes} bytes, kept as tool call ${callId}]`;
}
