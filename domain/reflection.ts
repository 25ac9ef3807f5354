import { z } from 'zod';
import { JOB_CONVERSATION_PREFIX, ROUTINE_CONVERSATION_PREFIX } from './ids';
import type { ModelMessage, ModelUsage } from './model';
import { REFLECTION } from './reflection-queue';
export { enqueue, REFLECTION, type QueuedSummary, type TurnSummary } from './reflection-queue';

/** Reflection learns from user conversations only: not from jobs (`sched:`) or routines (`routine:`). */
export function isUserConversation(conversationId: string): boolean {
  return !conversationId.startsWith(JOB_CONVERSATION_PREFIX) && !conversationId.startsWith(ROUTINE_CONVERSATION_PREFIX);
}

export const ProposalEdit = z.object({
  file: z.string().min(1).max(200),
  action: z.enum(['edit', 'compact', 'new', 'delete']),
  content: z.string().max(200_000).default(''),
  summary: z.string().max(2_000).default(''),
  rationale: z.string().max(4_000).default(''),
  conversationIds: z.array(z.string().max(200)).max(100).default([]),
});
export const Proposal = z.discriminatedUnion('status', [
  z.object({ status: z.literal('ok'), edits: z.array(ProposalEdit).min(1).max(50) }),
  z.object({ status: z.literal('skip'), reason: z.string().max(2_000).default('') }),
  z.object({ status: z.literal('escalate'), reason: z.string().max(2_000).default('') }),
]);
export type ProposalEdit = z.infer<typeof ProposalEdit>;
export type ProposalAnswer = z.infer<typeof Proposal>;
export type Proposal = Extract<ProposalAnswer, { status: 'ok' }>;

/**
 * The last JSON object of a model's answer, as a proposal; unlike Phantom, an unreadable answer is an error, never
 * "ok".
 */
export function parseProposal(reply: string): { ok: true; proposal: ProposalAnswer } | { ok: false; error: string } {
  for (let end = reply.lastIndexOf('}'); end >= 0; end = reply.lastIndexOf('}', end - 1)) {
    for (let start = reply.lastIndexOf('{', end); start >= 0; start = reply.lastIndexOf('{', start - 1)) {
      let raw: unknown;
      try {
        raw = JSON.parse(reply.slice(start, end + 1));
      } catch {
        continue;
      }
      const parsed = Proposal.safeParse(raw);
      if (parsed.success) return { ok: true, proposal: parsed.data };
      return {
        ok: false,
        error: parsed.error.issues.map((i) => `${i.path.join('.') || 'proposal'}: ${i.message}`).join('; '),
      };
    }
  }
  return { ok: false, error: 'the answer holds no JSON proposal' };
}

// ---- what the model is asked --------------------------------------------------------------------------------------

export const REFLECTION_MARKER = '[keel:reflect]';
export const GATE_MARKER = '[keel:reflect-gate]';
export const JUDGE_MARKER = '[keel:reflect-judge]';

export const REFLECTION_SYSTEM = [
  REFLECTION_MARKER,
  "You read recent conversations of an agent and propose edits to the agent's memory documents, or skip.",
  'Skip by default. Learn only durable things: preferences, corrections, facts, workflow rules. ' +
    'One concrete bullet per',
  'learning; no credentials, dates or emojis; compact duplicates. constitution.md never changes.',
  'Writable: persona.md, user-profile.md, domain-knowledge.md, strategies/*.md, memory/corrections.md, ' +
    'memory/principles.md.',
  'Answer with one JSON object: {"status":"skip","reason":…} or {"status":"escalate","reason":…} ' +
    '(a larger model should decide)',
  'or {"status":"ok","edits":[{"file":…,"action":"edit"|"compact"|"new","content":<the whole new file>,' +
    '"summary":…,"rationale":…,"conversationIds":[…]}]}.',
].join('\n');

export function reflectionMessage(
  files: Record<string, string>,
  conversations: readonly { conversationId: string; messages: readonly { role: string; text: string }[] }[],
): string {
  const memory = Object.entries(files)
    .map(([f, c]) => `--- ${f}\n${c}`)
    .join('\n');
  const talk = conversations
    .map((c) => `=== conversation ${c.conversationId}\n${c.messages.map((m) => `${m.role}: ${m.text}`).join('\n')}`)
    .join('\n\n');
  return `Current memory:\n${memory}\n\nConversations:\n${talk}`;
}

export const GATE_SYSTEM =
  `${GATE_MARKER}\nDecide whether this turn is worth learning from: ` +
  'preferences, corrections, new facts, workflow rules or agent errors. ' +
  'Always yes on failure; if in doubt, yes. Answer {"evolve": true|false, "reason": "…"}.';

export function gateMessage(g: {
  turns: number;
  outcome: string;
  errorReplies: number;
  firstUser: string;
  lastUser: string;
  lastReply: string;
}): string {
  return [
    `Turns: ${g.turns}; outcome: ${g.outcome}; error replies: ${g.errorReplies}`,
    `First user message: ${g.firstUser.slice(0, REFLECTION.gateFirstUserChars)}`,
    `Last user message: ${g.lastUser.slice(0, REFLECTION.gateFirstUserChars)}`,
    `Last reply: ${g.lastReply.slice(0, REFLECTION.gateLastReplyChars)}`,
  ].join('\n');
}

/** The gate's answer: anything but a clear "no" is a yes (Phantom: any error means fire). */
export function parseGate(reply: string): { evolve: boolean; reason: string } {
  const m = /\{[\s\S]*\}/.exec(reply);
  try {
    const o = JSON.parse(m?.[0] ?? '') as { evolve?: unknown; reason?: unknown };
    return { evolve: o.evolve !== false, reason: typeof o.reason === 'string' ? o.reason : '' };
  } catch {
    return { evolve: true, reason: 'the gate answer did not parse' };
  }
}

export const JUDGE_SYSTEM =
  `${JUDGE_MARKER}\nYou judge a proposed edit to an agent's memory against its constitution and safety. ` +
  'Answer {"pass": true|false, "confidence": 0..1, "reason": "…"}.';

// ---- cost ---------------------------------------------------------------------------------------------------------

/** USD per million tokens. */
export interface Prices {
  input: number;
  output: number;
}

export function costUsd(usage: ModelUsage, prices: Prices): number {
  return (
    ((usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens) * prices.input +
      usage.outputTokens * prices.output) /
    1_000_000
  );
}

// ---- the scripted model's answers ---------------------------------------------------------------------------------

/**
 * The scripted model reflecting: the proposal JSON after `/propose ` in the newest user message of the conversations
 * it reads (skip when there is none); the gate always says yes; a judge fails a proposal whose text holds `/veto`.
 */
export function scriptedReflectionAnswer(system: string, messages: readonly ModelMessage[]): string | undefined {
  const text = messages
    .flatMap((m) => m.content)
    .map((b) => (b.type === 'text' ? b.text : ''))
    .join('\n');
  if (system.startsWith(GATE_MARKER)) return JSON.stringify({ evolve: true, reason: 'scripted: always learn' });
  if (system.startsWith(JUDGE_MARKER)) {
    return JSON.stringify(
      text.includes('/veto')
        ? { pass: false, confidence: 0.9, reason: 'scripted veto' }
        : { pass: true, confidence: 0.9, reason: 'scripted pass' },
    );
  }
  if (!system.startsWith(REFLECTION_MARKER)) return undefined;
  const newest = text
    .split('\n')
    .filter((l) => l.startsWith('user: '))
    .at(-1);
  if (!newest?.includes('/propose ')) return JSON.stringify({ status: 'skip', reason: 'scripted: nothing to learn' });
  return newest.slice(newest.indexOf('/propose ') + '/propose '.length);
}

// ---- settings -----------------------------------------------------------------------------------------------------

export interface ReflectionSettings {
  drainEveryMs: number;
  drainAtQueued: number;
  /** The optional "worth learning?" model call before a summary is queued. */
  gate: boolean;
  gateModel: string;
  /** Reflection models, smallest first; `escalate` moves one tier up, at most twice. */
  tiers: string[];
  /** Judges asked about each proposal that passed the hard gates (0: none). */
  judges: number;
  /** Files whose edits wait for a human's approval. */
  approvalFiles: string[];
  approvalWaitMs: number;
  /** Reflection's model spending per agent per UTC day; a drain stops when it is reached. */
  dailyCostCeilingUsd: number;
  prices: Prices;
  /** Hosts URLs in memory may point to without a soft-check warning. */
  urlAllowlist: string[];
}

export const DEFAULT_REFLECTION_SETTINGS: ReflectionSettings = {
  drainEveryMs: REFLECTION.drainEveryMs,
  drainAtQueued: REFLECTION.drainAtQueued,
  gate: false,
  gateModel: 'claude-haiku-4-5',
  tiers: ['claude-haiku-4-5', 'claude-sonnet-4-5', 'claude-opus-4-1'],
  judges: 0,
  approvalFiles: ['persona.md'],
  approvalWaitMs: 7 * 24 * 3_600_000,
  dailyCostCeilingUsd: 5,
  prices: { input: 3, output: 15 },
  urlAllowlist: ['github.com', 'docs.temporal.io', 'developer.mozilla.org'],
};
