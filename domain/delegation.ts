import { z } from 'zod';
import type { TranscriptMessage } from './transcript';
import { storableString } from './text';
import { TOOL_SERVER_NAME, TOOL_SERVER_NAME_RULE } from './tool-servers';
export {
  CONTINUE_TEXT,
  DELEGATION,
  NUDGE_TEXT,
  OUTCOME_KINDS,
  settleOutcome,
  type EndEvent,
  type LiveLifecycle,
  type OutcomeKind,
  type TerminalOwner,
} from './delegate-lifecycle';
import { DELEGATION, type OutcomeKind, type TerminalOwner } from './delegate-lifecycle';

export const TASK_STATUSES = ['pending_approval', 'backlog', 'ready', 'in_progress', 'done', 'failed'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
export const HISTORY_MODES = ['clean', 'fork'] as const;
export type HistoryMode = (typeof HISTORY_MODES)[number];

export const SkillName = z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, '1–128 characters of [A-Za-z0-9._-]');

export const NewTask = z
  .object({
    title: storableString().min(1).max(500),
    description: storableString().max(32_768).default(''),
    status: z.enum(['pending_approval', 'backlog', 'ready']).default('backlog'),
    requiredSkills: z.array(SkillName).max(50).default([]),
    historyMode: z.enum(HISTORY_MODES).default('fork'),
    wallClockSeconds: z.number().int().min(1).max(86_400).default(DELEGATION.defaultWallClockSeconds),
    /** The tool servers its delegate may use; null: all of the agent's. */
    toolServers: z
      .array(z.string().regex(TOOL_SERVER_NAME, TOOL_SERVER_NAME_RULE))
      .max(50)
      .nullable()
      .default(null)
      .describe("The agent's tool servers its delegate may use (none: []); null or absent: all of them"),
  })
  .strict();
export type NewTask = z.infer<typeof NewTask>;

/** Status changes a user may make through the API; the delegate's own moves (claim, finish) are not among them. */
const USER_TRANSITIONS: Record<TaskStatus, readonly TaskStatus[]> = {
  pending_approval: ['ready', 'backlog'],
  backlog: ['ready', 'pending_approval'],
  ready: ['backlog', 'pending_approval'],
  in_progress: [],
  done: ['ready'],
  failed: ['ready'],
};

export function userMayMoveTask(from: TaskStatus, to: TaskStatus): boolean {
  return USER_TRANSITIONS[from].includes(to);
}

/** Why a task may not be worked on now, in words the model reads; undefined when it may. */
export function taskRefusal(number: number, status: TaskStatus): string | undefined {
  switch (status) {
    case 'ready':
    case 'in_progress':
      return undefined;
    case 'pending_approval':
    case 'backlog':
      return `task #${number} is ${status} — it must be approved (ready) before work starts`;
    case 'done':
    case 'failed':
      return `task #${number} is already ${status}`;
  }
}

// ---- the delegate's lifecycle -------------------------------------------------------------------------------------

/** The lifecycle column's terminal value for an outcome. */
export function terminalLifecycle(kind: OutcomeKind): string {
  return (
    {
      success: 'succeeded',
      partial: 'partial',
      timeout: 'timed_out',
      blocked: 'blocked',
      cancelled: 'cancelled',
      failed: 'failed',
    } as const
  )[kind];
}

/** A task moves to done when its delegate succeeded (fully or partly), to failed otherwise. */
export function taskStatusAfter(kind: OutcomeKind): 'done' | 'failed' {
  return kind === 'success' || kind === 'partial' ? 'done' : 'failed';
}

// ---- prompts and relay text ---------------------------------------------------------------------------------------

export const DELEGATE_INSTRUCTIONS = [
  'You are a delegate: you work on one task on behalf of a conversation, and the conversation relays your result.',
  'CRITICAL: Do not signal an outcome until every step of the task is actually complete. ' +
    'If the task has multiple steps,',
  'finish ALL of them before calling set_status with kind "outcome". Report progress with kind "progress" as you go.',
  'Use read_skill to read any skill in the index. If you cannot go on (a login wall, a missing permission), set the',
  'outcome with blocked set to the reason.',
].join('\n');

export const TASK_PREFIX = 'Task: ';

export function delegateSystemPrompt(p: {
  task: string;
  requiredSkills: { name: string; body: string }[];
  skillIndex: string[];
}): string {
  const parts = [DELEGATE_INSTRUCTIONS, `## Task\n${p.task}`];
  if (p.skillIndex.length)
    parts.push(`## Skills you can read with read_skill\n${p.skillIndex.map((s) => `- ${s}`).join('\n')}`);
  for (const s of p.requiredSkills) parts.push(`## Required skill: ${s.name}\n${s.body}`);
  return parts.join('\n\n');
}

/** What the delegate's first user message says: the task (the model reads it; the scripted model parses it). */
export function taskMessage(title: string, description: string): string {
  return description ? `${TASK_PREFIX}${title}\n\n${description}` : `${TASK_PREFIX}${title}`;
}

export interface AdmittedResult {
  delegateId: string;
  kind: OutcomeKind;
  result: string;
}

export const RETRIGGER_PREFIX = 'background task';

/** The synthetic message of a retrigger turn: the results, each under its delegate id and outcome. */
export function retriggerText(results: readonly AdmittedResult[]): string {
  const head =
    `${results.length} ${RETRIGGER_PREFIX}${results.length === 1 ? '' : 's'} just completed. ` +
    'The user has NOT seen any of the results below.';
  const body = results.map(
    (r) =>
      `--- delegate ${r.delegateId} (${r.kind}${r.kind === 'success' ? '' : ', NOT a full success'}) ---\n${r.result}`,
  );
  return [head, ...body, 'Relay these results to the user with the reply tool, in your own words.'].join('\n\n');
}

export function backgroundNote(r: AdmittedResult, why = ''): string {
  return `[Background delegate ${r.delegateId} ${r.kind}]${why ? ` (${why})` : ''}: ${r.result}`;
}

// ---- fork history -------------------------------------------------------------------------------------------------

const estimateTokens = (m: TranscriptMessage) => Math.ceil(JSON.stringify(m.content).length / 4);

/**
 * A forked history within a token budget: the oldest half is dropped until it fits, never leaving a tool result
 * (or an assistant message) first, and always keeping at least 4 messages. Returns how many were removed.
 */
export function forkHistory(
  messages: readonly TranscriptMessage[],
  budgetTokens: number,
): { kept: TranscriptMessage[]; removed: number } {
  const n = messages.length;
  const tokensFrom = (i: number) => messages.slice(i).reduce((sum, m) => sum + estimateTokens(m), 0);
  // A window may only open on a user message or a note: never on a tool result or an assistant message.
  const starts = messages.flatMap((m, i) => (m.role === 'user' || m.role === 'system' ? [i] : []));
  let start = starts[0] ?? n;
  while (start < n && tokensFrom(start) > budgetTokens) {
    const target = start + Math.max(1, Math.floor((n - start) / 2));
    const fits = (i: number) => i > start && n - i >= DELEGATION.forkMinMessages;
    // The next opening at or past half of what is left; else the latest opening that still keeps the minimum.
    const next = starts.find((i) => i >= target && fits(i)) ?? [...starts].reverse().find(fits);
    if (next === undefined) break;
    start = next;
  }
  return { kept: messages.slice(start), removed: start };
}

export function forkNote(removed: number): string {
  return `[Forked context compacted: ${removed} older message${removed === 1 ? '' : 's'} removed]`;
}

/** The result text of each outcome, as the conversation (and its model) will read it. */
export function outcomeResult(
  kind: OutcomeKind,
  d: { outcomeText?: string; recovered?: string; reason?: string; modelCalls?: number; wallClockSeconds?: number },
): string {
  switch (kind) {
    case 'success':
      return d.outcomeText ?? '';
    case 'blocked':
      return `Delegate blocked: ${d.reason ?? 'no reason given'}`;
    case 'partial':
      // Partial from a race (cancelled or failed while finishing) says so; otherwise the segments ran out.
      return d.reason
        ? `${d.recovered ?? d.outcomeText ?? ''}\n(partial result: ${d.reason})`.trim()
        : (
            `${d.recovered ?? d.outcomeText ?? ''}\n` +
            `(reached max segments after ${d.modelCalls ?? 0} model calls — partial result)`
          ).trim();
    case 'timeout':
      return d.recovered
        ? `${d.recovered}\n(Delegate exceeded its ${d.wallClockSeconds}s wall-clock timeout — partial result)`
        : `Delegate exceeded its ${d.wallClockSeconds}s wall-clock timeout before producing any result`;
    case 'cancelled':
      return `Delegate cancelled: ${d.reason ?? 'cancelled'}`;
    case 'failed':
      return `Delegate failed: ${d.reason ?? 'unknown error'}`;
  }
}

/** What a timed-out or partial delegate had done: its last progress report, else its last words. */
export function recoverProgress(messages: readonly TranscriptMessage[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'assistant') continue;
    for (const b of [...m.content].reverse()) {
      if (b.type === 'tool_use' && b.name === 'set_status' && typeof b.input.text === 'string') return b.input.text;
    }
  }
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'assistant') continue;
    const text = m.content
      .map((b) => (b.type === 'text' ? b.text : ''))
      .join('')
      .trim();
    if (text) return text;
  }
  return undefined;
}

/** The completion signal a delegate sends its conversation after its outcome is committed. */
export interface DelegateFinished {
  delegateId: string;
  outcomeVersion: number;
  transcriptVersion: number;
  outcomeKind: OutcomeKind;
  terminalOwner: TerminalOwner;
}

/** A delegate's committed outcome, as the terminal commit returns it (the winner's, when another wrote first). */
export interface CommittedOutcome extends DelegateFinished {
  result: string;
  conversationKey: string;
  /** True when this call's write won; false when another writer had committed first (its outcome is returned). */
  won: boolean;
}
