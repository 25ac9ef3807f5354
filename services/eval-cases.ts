import { keptTurns, queryConversations, type KeptTurn, type RecordedQuery } from '../db/eval-recordings';
import type { Pool } from '../db/pool';
import {
  EVALS,
  isTurnEnding,
  type CaseRow,
  type CaseTurn,
  type Check,
  type EvalCase,
  type EvalMode,
  type RecordedToolResult,
  type RecordedTurn,
} from '../domain/evals';
import { conversationWorkflowId, transcriptOrigin } from '../domain/ids';
import type { TextBlock, ToolResultBlock, ToolUseBlock } from '../domain/model';
import { TOOL } from '../domain/tool-names';
import { toolUses } from '../domain/transcript';

/** Recorded conversations, by id or by a query, as an evaluation takes them. */
export interface RecordedSelection {
  conversationIds?: string[];
  query?: Omit<RecordedQuery, 'limit'> & { limit?: number };
  /** The turns to run (1-based, inclusive); the ones before are the case's context. All of them when absent. */
  turns?: { from: number; to?: number };
  /** Checks each recorded case must also pass. */
  expect?: Check[];
}

/** A case written by hand (a YAML file under evals/): each message one turn. */
export interface WrittenCase {
  name: string;
  messages: string[];
  /** Answers for the candidate's tool calls, by tool and arguments. */
  tools?: RecordedToolResult[];
  expect?: Check[];
}

/** A case or a selection that cannot be taken, named for the person who asked. */
export class CaseError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 404,
  ) {
    super(message);
  }
}

/** The cases an evaluation asks for: its recorded conversations, then its written cases. */
export async function takeCases(
  pool: Pool,
  agentId: string,
  ask: { mode: EvalMode; recorded?: RecordedSelection; written?: WrittenCase[] },
): Promise<EvalCase[]> {
  if (ask.mode === 'replay' && ask.written?.length)
    throw new CaseError('written cases have no recorded model answers to replay: run them in live-model mode', 400);
  const cases: EvalCase[] = [];
  const sel = ask.recorded;
  if (sel) {
    const ids = new Set(sel.conversationIds ?? []);
    if (sel.query)
      for (const id of await queryConversations(pool, agentId, { limit: EVALS.queriedByDefault, ...sel.query }))
        ids.add(id);
    for (const conversationId of ids) {
      const kept = await keptTurns(pool, conversationWorkflowId(agentId, conversationId));
      if (kept.length === 0) throw new CaseError(`conversation ${conversationId} has no finished turn to replay`, 404);
      cases.push(recordedCase(conversationId, kept, sel.turns, sel.expect ?? []));
    }
  }
  const names = new Set<string>();
  for (const w of ask.written ?? []) {
    if (names.has(w.name)) throw new CaseError(`two written cases are named ${w.name}`, 400);
    names.add(w.name);
    cases.push(writtenCase(w));
  }
  if (cases.length === 0) throw new CaseError('the evaluation selects no case', 400);
  if (cases.length > EVALS.maxCases) throw new CaseError(`an evaluation holds at most ${EVALS.maxCases} cases`, 400);
  return cases;
}

/** A recorded conversation as a case: its turns with what each did; the turns before the range are its context. */
export function recordedCase(
  conversationId: string,
  kept: readonly KeptTurn[],
  range: RecordedSelection['turns'],
  checks: Check[],
): EvalCase {
  const from = range?.from ?? 1;
  const to = Math.min(range?.to ?? kept.length, kept.length);
  if (from > to) throw new CaseError(`conversation ${conversationId} has ${kept.length} turns; none from ${from}`, 400);
  if (to - from + 1 > EVALS.maxTurns) throw new CaseError(`a case holds at most ${EVALS.maxTurns} turns`, 400);
  const turns = kept.map(caseTurnOf);
  const chosen = turns.slice(from - 1, to);
  return {
    id: `conversation:${conversationId}${range ? `:${from}-${to}` : ''}`,
    source: 'recorded',
    conversationId,
    history: turns.slice(0, from - 1).flatMap((t) => t.recorded?.rows ?? []),
    turns: chosen,
    toolResults: chosen.flatMap((t) => (t.recorded ? recordedToolResults(t.recorded) : [])),
    checks,
  };
}

/** A kept turn: what came in before its first model call, and what it did. */
function caseTurnOf(k: KeptTurn): CaseTurn {
  const rows: CaseRow[] = k.rows.map((r) => ({ role: r.role, content: r.content }));
  const firstAnswer = k.rows.findIndex((r) => r.role === 'assistant');
  const answers = k.rows
    .map((r) => ({ r, call: modelCallOf(k.turnId, r.origin) }))
    .filter((a): a is { r: KeptTurn['rows'][number]; call: number } => a.call !== undefined)
    .sort((a, b) => a.call - b.call)
    .map((a) => a.r.content as (TextBlock | ToolUseBlock)[]);
  const results: Record<string, ToolResultBlock> = {};
  for (const row of k.rows) for (const b of row.content) if (b.type === 'tool_result') results[b.tool_use_id] = b;
  const recorded: RecordedTurn = {
    turnId: k.turnId,
    answers,
    results,
    costsUsd: answers.map((_, i) => k.costs[transcriptOrigin.modelCall(k.turnId, i + 1)] ?? 0),
    models: answers.map((_, i) => k.models[String(i + 1)] ?? null),
    outcome: k.status,
    reply: k.status === 'replied' ? replyOf(answers) : null,
    serverTools: k.tools ?? [],
    rows,
  };
  return { inputs: rows.slice(0, firstAnswer === -1 ? rows.length : firstAnswer), recorded };
}

/**
 * The model call a row answered, by its origin (a fork's copy by its source's); none for any other row (a partial
 * answer included).
 */
function modelCallOf(turnId: string, origin: string): number | undefined {
  const prefix = transcriptOrigin.modelCall(turnId, 0).slice(0, -1);
  const source = origin.replace(FORKED_COPY, '');
  if (!source.startsWith(prefix)) return undefined;
  const n = Number(source.slice(prefix.length));
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

/** The prefixes of a row copied into a fork (and into forks of it). */
const FORKED_COPY = new RegExp(`^(?:${transcriptOrigin.forked(0, '').replace('0', '\\d+')})+`);

/** What the turn replied: its last reply tool's text, or its last plain text. */
function replyOf(answers: readonly (TextBlock | ToolUseBlock)[][]): string | null {
  for (const answer of [...answers].reverse()) {
    const reply = toolUses(answer).find((u) => u.name === TOOL.reply);
    if (reply && typeof reply.input.text === 'string') return reply.input.text;
    const text = answer.filter((b): b is TextBlock => b.type === 'text').map((b) => b.text);
    if (text.length && toolUses(answer).length === 0) return text.join('');
  }
  return null;
}

/** The tool results a recorded turn's calls got, by tool and arguments. */
function recordedToolResults(t: RecordedTurn): RecordedToolResult[] {
  return t.answers.flatMap((answer) =>
    toolUses(answer)
      .filter((u) => !isTurnEnding(u.name) && t.results[u.id])
      .map((u) => {
        const r = t.results[u.id]!;
        const flags = { ...(r.is_error ? { isError: true } : {}), ...(r.ref ? { ref: r.ref } : {}) };
        return { tool: u.name, arguments: u.input, content: r.content, ...flags };
      }),
  );
}

export function writtenCase(w: WrittenCase): EvalCase {
  return {
    id: w.name,
    source: 'written',
    history: [],
    turns: w.messages.map((text) => ({ inputs: [{ role: 'user', content: [{ type: 'text', text }] }] })),
    toolResults: w.tools ?? [],
    checks: w.expect ?? [],
  };
}
