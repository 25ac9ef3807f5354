/**
 * Evaluations: cases taken from what really happened (a recorded conversation) or written by hand, run against a
 * candidate configuration of an agent that is never applied to the agent. Pure: what a case holds, what a turn of it
 * did, the checks that score it, and the first place a candidate's model request parts from the recorded one.
 */
import { canonicalJson } from './canonical-json';
import type { MemoryFiles } from './memory';
import type { ContentBlock, ModelRequest, TextBlock, ToolResultBlock, ToolUseBlock } from './model';
import type { Budgets } from './spend';
import { TOOL } from './tool-names';
import { modelToolName, type PinnedTool, type ToolPolicy } from './tool-servers';
import type { TranscriptRole } from './transcript';

export type EvalMode = 'replay' | 'live-model';
export const EVAL_MODES: readonly EvalMode[] = ['replay', 'live-model'];

export const EVALS = {
  /** Cases of one evaluation run side by side. */
  concurrentCases: 4,
  /** Cases one evaluation may hold. */
  maxCases: 200,
  /** Turns one case may hold. */
  maxTurns: 200,
  /** Recorded conversations a query selects at most, and when it does not say. */
  maxQueried: 50,
  queriedByDefault: 20,
  /** Evaluations a list shows. */
  listed: 50,
  /** What a judge may answer, in tokens. */
  judgeMaxTokens: 300,
  /** The most of a diff a report carries, in characters. */
  diffChars: 4_000,
} as const;

/** An overlay of an agent's configuration; what it leaves out is the agent's own. */
export interface Candidate {
  systemPrompt?: string | null;
  /** A version of the agent's memory instead of its current one. */
  memoryVersion?: number;
  model?: string;
  /** Policies by the tool's model-facing name (`server__tool`): a denied tool is not offered. */
  toolPolicies?: Record<string, ToolPolicy>;
  /** The tool servers offered, by name; all the agent's enabled servers when absent. */
  toolServers?: string[];
  budgets?: Budgets;
}

/** An agent's configuration as a turn reads it (its own, or under a candidate). */
export interface AgentConfig {
  name: string;
  systemPrompt: string | null;
  /** Null: the worker's default model. */
  model: string | null;
  memory: MemoryFiles;
  budgets: Budgets;
  /** The enabled servers' tools as a turn begun then would be offered them (a written case's). */
  serverTools: PinnedTool[];
}

/** The configurations an evaluation runs under, fixed as it began: the agent's own and the candidate's. */
export interface EvalConfigs {
  recorded: AgentConfig;
  candidate: AgentConfig;
}

/** One transcript row as a case carries it. */
export interface CaseRow {
  role: TranscriptRole;
  content: ContentBlock[];
}

/** A tool's recorded answer, found by the tool's model-facing name and its arguments. */
export interface RecordedToolResult {
  tool: string;
  arguments: Record<string, unknown>;
  content: string;
  isError?: boolean;
  /** A result Keel keeps whole (the content is its preview): a live model reads it whole, as a turn does. */
  ref?: string;
}

/** What a turn did when it really ran. */
export interface RecordedTurn {
  turnId: string;
  /** The model's answers, by model call (1-based): `answers[0]` is call 1's. */
  answers: (TextBlock | ToolUseBlock)[][];
  /** The tool results the turn's model calls read, by tool use id. */
  results: Record<string, ToolResultBlock>;
  /** Each model call's cost in USD, as the spend ledger holds it. */
  costsUsd: number[];
  /** The model each call asked, as its record says (null where no record says). */
  models: (string | null)[];
  outcome: string;
  reply: string | null;
  /** The tool servers' tools the turn was offered, as they were pinned to it. */
  serverTools: PinnedTool[];
  /** The turn's transcript rows in order: what its model calls read and answered. */
  rows: CaseRow[];
}

/** One turn of a case: what came in (a person's message, a note), and, for a recorded case, what happened. */
export interface CaseTurn {
  inputs: CaseRow[];
  recorded?: RecordedTurn;
}

export type Check =
  | { replyContains: string; turn?: number }
  | { replyMatches: string; turn?: number }
  | { toolCalled: string; arguments?: Record<string, unknown> }
  | { toolNotCalled: string }
  | { outcome: string; turn?: number }
  | { guard: 'passed' | 'blocked'; turn?: number }
  | { costUsdAtMost: number }
  | { turnsAtMost: number }
  | { judge: { rubric: string; model?: string } };

export interface EvalCase {
  id: string;
  source: 'recorded' | 'written';
  /** The recorded conversation's id. */
  conversationId?: string;
  /** The transcript before the case's first turn (a turn range's earlier turns), read as context. */
  history: CaseRow[];
  turns: CaseTurn[];
  /** Tool results to answer the candidate's calls with: a recording's, or a written case's. */
  toolResults: RecordedToolResult[];
  checks: Check[];
}

/** How a tool call of the candidate's was answered. */
export type ToolAnswer = 'recording' | 'dry-run' | 'denied' | 'needs-approval' | 'channel';

export interface EvalToolCall {
  name: string;
  arguments: Record<string, unknown>;
  answeredBy: ToolAnswer;
  isError: boolean;
}

/** Where the candidate's model request first parts from the recorded one. */
export interface Divergence {
  turn: number;
  callIndex: number;
  part: 'model' | 'system' | 'tools' | 'messages';
  diff: string;
}

export interface GuardFinding {
  verdict: 'passed' | 'blocked';
  rule?: string;
}

/** A turn as the candidate ran it. */
export interface EvalTurnResult {
  turn: number;
  /** The rows the turn added to the case's transcript (inputs, answers, results). */
  rows: CaseRow[];
  outcome: string;
  reply: string | null;
  guard: GuardFinding[];
  toolCalls: EvalToolCall[];
  modelCalls: number;
  costUsd: number;
  latencyMs: number;
  divergence?: Divergence;
}

/** A case's verdict. */
export interface CaseResult {
  passed: boolean;
  reasons: string[];
  costUsd: number;
  latencyMs: number;
  modelCalls: number;
  turns: number;
  /** Turns (1-based) whose outcome, reply or tool calls differ from the recording. */
  changedTurns: number[];
  /** Tool calls the candidate made that the recording did not, and the other way round, by turn. */
  toolCallDiff: { turn: number; added: string[]; removed: string[] }[];
  firstDivergence?: Divergence;
}

/** The key a recorded tool result is found by: the tool's name and its arguments in canonical form. */
export function toolResultKey(tool: string, args: unknown): string {
  return `${tool}\n${canonicalJson(args)}`;
}

/** A call's label with its arguments, as reports show it. */
export function toolCallLabel(name: string, args: unknown): string {
  return `${name} ${canonicalJson(args)}`;
}

/**
 * The first part of a request that differs from the recorded one: the model, the system prompt, the tools offered,
 * then the messages. Answers a short line diff of that part, or undefined when the two are the same.
 */
export function requestDivergence(
  recorded: ModelRequest,
  candidate: ModelRequest,
): Pick<Divergence, 'part' | 'diff'> | undefined {
  if (recorded.model !== candidate.model) return { part: 'model', diff: `- ${recorded.model}\n+ ${candidate.model}` };
  if (recorded.system !== candidate.system)
    return { part: 'system', diff: lineDiff(recorded.system, candidate.system) };
  const names = (r: ModelRequest) => r.tools.map((t) => t.name).join('\n');
  if (canonicalJson(recorded.tools) !== canonicalJson(candidate.tools))
    return {
      part: 'tools',
      diff: lineDiff(names(recorded), names(candidate)) || 'the same tools, described otherwise',
    };
  const lines = (r: ModelRequest) => r.messages.map((m) => `${m.role}: ${canonicalJson(m.content)}`).join('\n');
  if (canonicalJson(recorded.messages) !== canonicalJson(candidate.messages))
    return { part: 'messages', diff: lineDiff(lines(recorded), lines(candidate)) };
  return undefined;
}

/**
 * The lines that differ between two texts, around their first difference: the common start and end are cut, and
 * what remains shows as removed (`-`) and added (`+`) lines.
 */
export function lineDiff(before: string, after: string): string {
  // An empty text has no lines (not one empty line).
  const lines = (text: string) => (text === '' ? [] : text.split('\n'));
  const a = lines(before);
  const b = lines(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const context = start > 0 ? [`  ${a[start - 1]}`] : [];
  const out = [
    ...context,
    ...a.slice(start, endA).map((l) => `- ${l}`),
    ...b.slice(start, endB).map((l) => `+ ${l}`),
  ].join('\n');
  return out.length > EVALS.diffChars ? `${out.slice(0, EVALS.diffChars)}\n[… the diff is cut]` : out;
}

/** What the case's turns did against what the recording says they did. */
export function recordedChanges(c: EvalCase, turns: readonly EvalTurnResult[]) {
  const changedTurns: number[] = [];
  const reasons: string[] = [];
  const toolCallDiff: CaseResult['toolCallDiff'] = [];
  for (const t of turns) {
    const recorded = c.turns[t.turn - 1]?.recorded;
    if (!recorded) continue;
    const why: string[] = [];
    if (t.outcome !== recorded.outcome) why.push(`ended ${t.outcome} where the recording ${recorded.outcome}`);
    else if (recorded.reply !== null && t.reply !== recorded.reply) why.push('replied otherwise than the recording');
    const ran = recordedToolCalls(recorded);
    const made = t.toolCalls.map((call) => toolCallLabel(call.name, call.arguments));
    const added = made.filter((l) => !ran.includes(l));
    const removed = ran.filter((l) => !made.includes(l));
    if (added.length || removed.length) toolCallDiff.push({ turn: t.turn, added, removed });
    for (const call of t.toolCalls) {
      if (call.answeredBy === 'denied') why.push(`${call.name} was denied by the candidate's policy`);
      if (call.answeredBy === 'needs-approval') why.push(`${call.name} would wait for a person's approval`);
      if (call.answeredBy === 'dry-run') why.push(`${call.name} was called with arguments the recording never saw`);
    }
    if (why.length) {
      changedTurns.push(t.turn);
      reasons.push(`turn ${t.turn}: ${why.join('; ')}`);
    }
  }
  return { changedTurns, reasons, toolCallDiff };
}

/** Keel's own tools that end a turn: a report lists a turn's other tool calls. */
export const isTurnEnding = (name: string) => name === TOOL.reply || name === TOOL.skip;

/** The tool calls a recorded turn's model calls made, Keel's own reply and skip aside. */
function recordedToolCalls(recorded: RecordedTurn): string[] {
  return recorded.answers
    .flat()
    .filter((b): b is ToolUseBlock => b.type === 'tool_use' && !isTurnEnding(b.name))
    .map((b) => toolCallLabel(b.name, b.input));
}

/**
 * What a fork's tool call gets instead of its effect, unless a person enabled the tool's effects: Keel's own tools that
 * would start work outside the fork (a Schedule, a delegate) are never enabled.
 */
export function forkDryRun(fork: { enabledTools: readonly string[] }, tool: string): string | undefined {
  if (fork.enabledTools.includes(tool) && !FORK_NEVER_ENABLED.includes(tool)) return undefined;
  return `dry run: ${tool} was not called; effects of this fork's calls of it are off`;
}
const FORK_NEVER_ENABLED: readonly string[] = [TOOL.schedule, TOOL.spawnDelegate];

/**
 * Tool servers under the candidate (a fork's turns): its servers only, when it names them, with its policies over
 * theirs. The turn then offers and runs them as it would any server's (services/turn-tools.ts).
 */
export function serversUnderCandidate<
  S extends { name: string; enabled: boolean; policies: Record<string, ToolPolicy> },
>(servers: readonly S[], candidate: Candidate): S[] {
  return servers.map((s) => {
    const prefix = modelToolName(s.name, '');
    const policies = { ...s.policies };
    for (const [name, policy] of Object.entries(candidate.toolPolicies ?? {}))
      if (name.startsWith(prefix)) policies[name.slice(prefix.length)] = policy;
    const enabled = s.enabled && (candidate.toolServers === undefined || candidate.toolServers.includes(s.name));
    return { ...s, enabled, policies };
  });
}

/**
 * The servers' tools under the candidate: its servers only, when it names them, each tool under the candidate's
 * policy for it. A denied tool is not offered, as a turn offers none (services/turn-tools.ts).
 */
export function candidateTools(tools: readonly PinnedTool[], candidate: Candidate): PinnedTool[] {
  const servers = candidate.toolServers;
  return tools
    .filter((t) => servers === undefined || servers.includes(t.server))
    .map((t) => ({ ...t, policy: candidate.toolPolicies?.[t.modelName] ?? t.policy }))
    .filter((t) => t.policy !== 'deny');
}

/** Whether `args` holds every argument the check names, with the same value. */
function argumentsMatch(args: Record<string, unknown>, wanted: Record<string, unknown> | undefined): boolean {
  if (!wanted) return true;
  return Object.entries(wanted).every(([k, v]) => canonicalJson(args[k]) === canonicalJson(v));
}

/**
 * The written checks of a case, each answering a reason when it fails. A judge's verdict is given (the judge is a
 * model call, made outside this rule); a judge check without one fails.
 */
export function failedChecks(
  checks: readonly Check[],
  turns: readonly EvalTurnResult[],
  judged: readonly Pick<Judged, 'passed' | 'reason'>[] = [],
): string[] {
  const failures: string[] = [];
  const pick = (turn: number | undefined) => (turn === undefined ? turns : turns.filter((t) => t.turn === turn));
  const where = (turn: number | undefined) => (turn === undefined ? 'any turn' : `turn ${turn}`);
  const calls = turns.flatMap((t) => t.toolCalls);
  let judgeIndex = 0;
  for (const check of checks) {
    if ('replyContains' in check) {
      if (!pick(check.turn).some((t) => t.reply?.includes(check.replyContains)))
        failures.push(`no reply of ${where(check.turn)} contains "${check.replyContains}"`);
    } else if ('replyMatches' in check) {
      const re = new RegExp(check.replyMatches);
      if (!pick(check.turn).some((t) => t.reply !== null && re.test(t.reply)))
        failures.push(`no reply of ${where(check.turn)} matches /${check.replyMatches}/`);
    } else if ('toolCalled' in check) {
      const answered = calls.filter((c) => c.name === check.toolCalled && c.answeredBy !== 'denied');
      if (!answered.some((c) => argumentsMatch(c.arguments, check.arguments)))
        failures.push(
          `${check.toolCalled} was not called${check.arguments ? ` with ${canonicalJson(check.arguments)}` : ''}`,
        );
    } else if ('toolNotCalled' in check) {
      // A denied call was asked for, not made, as toolCalled counts it.
      if (calls.some((c) => c.name === check.toolNotCalled && c.answeredBy !== 'denied'))
        failures.push(`${check.toolNotCalled} was called`);
    } else if ('outcome' in check) {
      const ended = pick(check.turn).map((t) => t.outcome);
      if (!ended.includes(check.outcome))
        failures.push(`no turn of ${where(check.turn)} ended ${check.outcome} (${ended.join(', ') || 'none ran'})`);
    } else if ('guard' in check) {
      const verdicts = pick(check.turn).flatMap((t) => t.guard.map((g) => g.verdict));
      if (!verdicts.includes(check.guard))
        failures.push(`the reply guard ${check.guard} no reply of ${where(check.turn)}`);
    } else if ('costUsdAtMost' in check) {
      const cost = turns.reduce((sum, t) => sum + t.costUsd, 0);
      if (cost > check.costUsdAtMost) failures.push(`it cost $${cost.toFixed(6)}, over $${check.costUsdAtMost}`);
    } else if ('turnsAtMost' in check) {
      if (turns.length > check.turnsAtMost) failures.push(`it took ${turns.length} turns, over ${check.turnsAtMost}`);
    } else {
      const verdict = judged[judgeIndex++];
      if (!verdict) failures.push('the judge gave no verdict');
      else if (!verdict.passed) failures.push(`the judge failed it: ${verdict.reason}`);
    }
  }
  return failures;
}

/** A judge's verdict on a case, and what its call cost. */
export interface Judged {
  passed: boolean;
  reason: string;
  costUsd: number;
}

/** The judge's answer read: its first word PASS or FAIL, then its reason. */
export function judgeVerdict(text: string): { passed: boolean; reason: string } {
  const m = /^\s*(PASS|FAIL)\b[\s:.-]*([\s\S]*)$/i.exec(text);
  if (!m) return { passed: false, reason: `the judge answered neither PASS nor FAIL: ${text.slice(0, 200)}` };
  return { passed: m[1]!.toUpperCase() === 'PASS', reason: m[2]!.trim() || m[1]!.toUpperCase() };
}

/** The judge's instructions. */
export const JUDGE_SYSTEM =
  'You judge one conversation of an AI agent against a rubric. Answer PASS or FAIL first, then one line saying why.';

/** What the judge reads: the rubric and the transcript the candidate produced. */
export function judgeQuestion(rubric: string, turns: readonly EvalTurnResult[]): string {
  const lines = turns.flatMap((t) =>
    t.rows.map((r) => `${r.role}: ${r.content.map((b) => ('text' in b ? b.text : canonicalJson(b))).join(' ')}`),
  );
  return `Rubric:\n${rubric}\n\nTranscript:\n${lines.join('\n')}`;
}

/** A case's verdict from its turns: the recording's changes (recorded cases), and its checks. */
export function caseResult(c: EvalCase, turns: readonly EvalTurnResult[], judged: readonly Judged[] = []): CaseResult {
  const changes = recordedChanges(c, turns);
  const reasons = [...changes.reasons, ...failedChecks(c.checks, turns, judged)];
  const firstDivergence = turns.find((t) => t.divergence)?.divergence;
  // A judge's call is a model call of the case's, paid for like the turns'.
  return {
    passed: reasons.length === 0,
    reasons,
    costUsd: [...turns, ...judged].reduce((sum, t) => sum + t.costUsd, 0),
    latencyMs: turns.reduce((sum, t) => sum + t.latencyMs, 0),
    modelCalls: turns.reduce((sum, t) => sum + t.modelCalls, 0) + judged.length,
    turns: turns.length,
    changedTurns: changes.changedTurns,
    toolCallDiff: changes.toolCallDiff,
    ...(firstDivergence ? { firstDivergence } : {}),
  };
}

/** An evaluation's counts once its cases are scored. */
export interface EvalSummary {
  cases: number;
  passed: number;
  failed: number;
  costUsd: number;
  modelCalls: number;
}
