import { evalAnswer, evalCase, evalTurns, keepEvalAnswer, putEvalTurn, type EvalRow } from '../db/evals';
import { callSpend } from '../db/spend';
import {
  candidateTools,
  type AgentConfig,
  isTurnEnding,
  requestDivergence,
  toolResultKey,
  type CaseRow,
  type Divergence,
  type EvalCase,
  type EvalToolCall,
  type EvalTurnResult,
  type GuardFinding,
  type RecordedToolResult,
  type RecordedTurn,
  type ToolAnswer,
} from '../domain/evals';
import { evalCallKey, evalConversationKey } from '../domain/ids';
import { LIMITS } from '../domain/limits';
import type { ModelRequest, TextBlock, ToolResultBlock, ToolUseBlock } from '../domain/model';
import { checkReply, guardErrorForModel, type GuardVerdict } from '../domain/reply-guard';
import { estimatedInputTokens, overrunMessage, overrunOf, priceOf, worstCaseUsd } from '../domain/spend';
import { CHANNEL_TOOL_NAMES, TOOL } from '../domain/tool-names';
import { isServerToolName, serverToolOf, type PinnedTool } from '../domain/tool-servers';
import { checkToolCalls } from '../domain/tools';
import {
  replyResult,
  TRANSCRIPT_WINDOW,
  textOf,
  toModelMessages,
  toolResult,
  toolUses,
  trimWindowStart,
} from '../domain/transcript';
import { channelRequest } from './conversation-model-call';
import { BudgetStop, meteredModelCall, type ModelCallDeps } from './model-call';
import type { Step } from './step';
import { withWholeResults } from './tool-results';

export interface EvalTurnDeps extends ModelCallDeps {
  defaultModel: string;
}

/** What an evaluation's turn step is told: the case's turn to run (1-based). */
export interface EvalTurnInput {
  evalId: string;
  caseId: string;
  turn: number;
}

/**
 * One turn of a case under the candidate, as Keel's turn would run it: the model request built as a turn builds it,
 * the answer (the recording's in `replay`, the candidate model's in `live-model`), then Keel's own rules on what the
 * answer asks for: the reply guard, the tools' policies and routing, the per-turn budget. Nothing leaves Keel: a
 * reply is checked and kept, a tool's call is answered from the recording (or as a dry run), and Keel's own tools
 * that would start work (a delegate, a Schedule) are answered from the recording too. The turn's result is written
 * once; a retried step finds it.
 */
export async function runEvalTurn(deps: EvalTurnDeps, input: EvalTurnInput, step: Step): Promise<EvalTurnResult> {
  const { pool } = deps;
  const [{ evaluation, spec }, done] = await Promise.all([
    evalCase(pool, input.evalId, input.caseId),
    evalTurns(pool, input.evalId, input.caseId),
  ]);
  const kept = done.find((t) => t.turn === input.turn);
  if (kept) return kept;
  const caseTurn = spec.turns[input.turn - 1];
  if (!caseTurn) throw new Error(`case ${input.caseId} has no turn ${input.turn}`);
  const earlier = done.filter((t) => t.turn < input.turn);
  // The worker's default model where the agent names none, as its turns have.
  const resolved = (c: AgentConfig): AgentConfig => ({ ...c, model: c.model ?? deps.defaultModel });
  const configs = {
    recorded: resolved(evaluation.configs.recorded),
    candidate: resolved(evaluation.configs.candidate),
  };
  // The recorded request is compared until the case's first divergence.
  const recorded = earlier.some((t) => t.divergence) ? undefined : caseTurn.recorded;
  const run = new EvalTurn(deps, evaluation, spec, input, step, configs.candidate);
  const result = await run.play([...spec.history, ...earlier.flatMap((t) => t.rows)], caseTurn.inputs, (call, req) =>
    recorded ? divergenceAt(spec, input.turn, call, req, configs.recorded, recorded) : undefined,
  );
  await putEvalTurn(pool, input.evalId, input.caseId, result);
  return result;
}

/** Where the candidate's request for a model call first differs from the one the recorded turn made. */
function divergenceAt(
  spec: EvalCase,
  turn: number,
  callIndex: number,
  candidate: ModelRequest,
  recordedConfig: AgentConfig,
  recorded: RecordedTurn,
): Divergence | undefined {
  const before = spec.turns.slice(0, turn - 1).flatMap((t) => t.recorded?.rows ?? t.inputs);
  // The turn's rows before its callIndex-th answer.
  const rows: CaseRow[] = [];
  let answers = 0;
  for (const row of recorded.rows) {
    if (row.role === 'assistant' && ++answers === callIndex) break;
    rows.push(row);
  }
  // The model as the call recorded it; the rest as the agent's configuration was when the evaluation began.
  const config = { ...recordedConfig, model: recorded.models[callIndex - 1] ?? recordedConfig.model };
  const request = requestOf(config, [...spec.history, ...before, ...rows], recorded.serverTools);
  const found = requestDivergence(request, candidate);
  return found && { turn, callIndex, ...found };
}

/** The request a turn would make of these rows under this configuration. */
function requestOf(config: AgentConfig, rows: readonly CaseRow[], serverTools: readonly PinnedTool[]): ModelRequest {
  const numbered = rows.slice(-TRANSCRIPT_WINDOW).map((r, i) => ({ ...r, seq: i + 1 }));
  return channelRequest({
    model: config.model!,
    name: config.name,
    systemPrompt: config.systemPrompt,
    memory: config.memory,
    messages: toModelMessages(trimWindowStart(numbered)),
    toolNames: CHANNEL_TOOL_NAMES,
    serverTools,
  });
}

/**
 * A written case's `tools` stand in for servers the agent offers no tool of (none configured by that name, or
 * disabled): each tool they answer is offered as such a server would list it, with the arguments its results name, so
 * the case runs offline with no tool server configured. A server the agent offers tools of keeps its own listing and
 * policies: a case adds no tool to it.
 */
function standInTools(results: readonly RecordedToolResult[], offered: readonly PinnedTool[]): PinnedTool[] {
  const servers = new Set(offered.map((t) => t.server));
  const tools = new Map<string, { server: string; name: string; args: Set<string> }>();
  for (const r of results) {
    const named = serverToolOf(r.tool);
    if (!named || servers.has(named.server)) continue;
    const tool = tools.get(r.tool) ?? { ...named, args: new Set<string>() };
    for (const arg of Object.keys(r.arguments)) tool.args.add(arg);
    tools.set(r.tool, tool);
  }
  return [...tools].map(([modelName, { server, name, args }]) => ({
    name,
    description: `${name} of ${server}, answered from the evaluation case's recorded results`,
    // Argument names only: a recorded result says nothing of their types.
    inputSchema: { type: 'object', properties: Object.fromEntries([...args].map((a) => [a, {}])) },
    annotations: {},
    modelName,
    policy: 'auto',
    server,
    serverVersion: 0,
  }));
}

type Answer = (TextBlock | ToolUseBlock)[];

/** A turn of a case in progress: its rows, what it ended with, and what it found on the way. */
class EvalTurn {
  private readonly rows: CaseRow[] = [];
  private outcome = 'error';
  private reply: string | null = null;
  private readonly guard: GuardFinding[] = [];
  private readonly toolCalls: EvalToolCall[] = [];
  private modelCalls = 0;
  private costUsd = 0;
  private corrections = 0;
  private divergence?: Divergence;
  private readonly recorded?: RecordedTurn;
  /** The servers' tools the turn would offer, before and under the candidate's policies. */
  private readonly offered: { before: readonly PinnedTool[]; candidate: PinnedTool[] };
  private readonly results: Map<string, { content: string; isError: boolean; ref?: string }>;

  constructor(
    private readonly deps: EvalTurnDeps,
    private readonly evaluation: EvalRow,
    spec: EvalCase,
    private readonly input: EvalTurnInput,
    private readonly step: Step,
    private readonly config: AgentConfig,
  ) {
    this.recorded = spec.turns[input.turn - 1]?.recorded;
    const before =
      this.recorded?.serverTools ??
      (spec.source === 'written'
        ? [...config.serverTools, ...standInTools(spec.toolResults, config.serverTools)]
        : config.serverTools);
    this.offered = { before, candidate: candidateTools(before, evaluation.candidate) };
    this.results = new Map(
      spec.toolResults.map((r) => [
        toolResultKey(r.tool, r.arguments),
        { content: r.content, isError: !!r.isError, ...(r.ref ? { ref: r.ref } : {}) },
      ]),
    );
  }

  async play(
    context: readonly CaseRow[],
    inputs: readonly CaseRow[],
    compare: (callIndex: number, request: ModelRequest) => Divergence | undefined,
  ): Promise<EvalTurnResult> {
    const started = Date.now();
    this.rows.push(...inputs);
    let ended = false;
    for (let callIndex = 1; !ended; callIndex++) {
      if (callIndex > LIMITS.modelCallsPerTurn) {
        this.outcome = 'error';
        break;
      }
      const request = requestOf(this.config, [...context, ...this.rows], this.offered.candidate);
      this.divergence ??= compare(callIndex, request);
      const stop = this.budgetStop(request);
      if (stop) {
        this.outcome = 'budget_exhausted';
        this.rows.push({ role: 'system', content: [{ type: 'text', text: stop }] });
        break;
      }
      let answer: Answer | undefined;
      try {
        answer = await this.answer(callIndex, request);
      } catch (err) {
        if (!(err instanceof BudgetStop)) throw err;
        this.outcome = 'budget_exhausted';
        this.rows.push({ role: 'system', content: [{ type: 'text', text: err.message }] });
        break;
      }
      if (!answer) {
        this.outcome = 'error';
        const text = `the recording has no answer for model call ${callIndex} of this turn`;
        this.rows.push({ role: 'system', content: [{ type: 'text', text }] });
        break;
      }
      const checked = checkToolCalls(answer, CHANNEL_TOOL_NAMES);
      this.rows.push({ role: 'assistant', content: checked.content });
      const uses = toolUses(checked.content);
      if (uses.length === 0) {
        // Plain text is a delivery path too, through the same guard; a blocked one is a note the model reads next.
        const text = textOf(checked.content);
        if (!text.trim()) this.outcome = 'skipped';
        else {
          const verdict = this.guarded(text);
          if (verdict.ok) this.outcome = 'replied';
          else if (this.corrections <= LIMITS.guardCorrections) {
            this.rows.push({ role: 'system', content: [{ type: 'text', text: guardErrorForModel(verdict) }] });
            continue;
          }
        }
        break;
      }
      const results: ToolResultBlock[] = [];
      for (const use of uses) {
        if (ended) {
          results.push(toolResult(use.id, 'not run: the turn had already ended', true));
          continue;
        }
        const done = this.route(use, checked.inputErrors?.[use.id]);
        results.push(done.result);
        ended = done.ends;
      }
      this.rows.push({ role: 'tool', content: results });
    }
    return {
      turn: this.input.turn,
      rows: this.rows,
      outcome: this.outcome,
      reply: this.reply,
      guard: this.guard,
      toolCalls: this.toolCalls,
      modelCalls: this.modelCalls,
      costUsd: this.costUsd,
      latencyMs: Date.now() - started,
      ...(this.divergence ? { divergence: this.divergence } : {}),
    };
  }

  /** The per-turn budget as Keel reserves against it: what the turn spent, and this call's worst case. */
  private budgetStop(request: ModelRequest): string | undefined {
    const limit = this.config.budgets.perTurnUsd;
    if (limit === undefined) return undefined;
    const worst = worstCaseUsd(
      { inputTokens: estimatedInputTokens(request), maxTokens: request.maxTokens },
      priceOf(this.deps.prices, request.model),
    );
    const overrun = overrunOf({ name: 'perTurnUsd', limitUsd: limit }, { spentUsd: this.costUsd, heldUsd: 0 }, worst);
    return overrun && overrunMessage(overrun);
  }

  /** The model's answer: the recording's (replay), or the candidate model's, metered (live-model). */
  private async answer(callIndex: number, request: ModelRequest): Promise<Answer | undefined> {
    if (this.evaluation.mode === 'replay') {
      const answer = this.recorded?.answers[callIndex - 1];
      if (answer) this.costUsd += this.recorded?.costsUsd[callIndex - 1] ?? 0;
      return answer;
    }
    this.modelCalls++;
    const { pool } = this.deps;
    const { evalId, caseId, turn } = this.input;
    const callKey = evalCallKey.model(evalId, caseId, turn, callIndex);
    const paid = await evalAnswer(pool, callKey);
    if (paid) {
      this.costUsd += (await callSpend(pool, callKey))?.costUsd ?? 0;
      return paid as Answer;
    }
    const conversationKey = evalConversationKey(evalId, caseId);
    // The model reads a large tool result whole, as a turn's call does; the request compared keeps its preview.
    const whole = { ...request, messages: await withWholeResults(pool, request.messages) };
    const { committed, spend } = await meteredModelCall(this.deps, {
      callKey,
      payer: { agentId: this.evaluation.agentId, kind: 'eval', conversationKey },
      request: whole,
      context: {
        attempt: this.step.attempt,
        conversationKey,
        turnId: `${caseId}:${turn}`,
        callIndex,
        onTextDelta: () => undefined,
        heartbeat: () => this.step.heartbeat(),
        signal: this.step.signal,
        sleep: (ms) => this.step.sleep(ms),
      },
      // Another attempt's answer, when it kept one first: the turn goes on with the answer paid for.
      commit: (db, res) => keepEvalAnswer(db, { callKey, evalId, caseId, content: res.content }),
    });
    this.costUsd += spend?.costUsd ?? (await callSpend(pool, callKey))?.costUsd ?? 0;
    return committed as Answer;
  }

  /** A reply through the guard; passed, it is the turn's reply. A blocked one counts against the corrections. */
  private guarded(text: string): GuardVerdict {
    const verdict = checkReply(text, { rules: 'all' });
    this.guard.push(verdict.ok ? { verdict: 'passed' } : { verdict: 'blocked', rule: verdict.rule });
    if (verdict.ok) this.reply = text;
    else this.corrections++;
    return verdict;
  }

  /** What one tool call of the answer gets, and whether it ends the turn. */
  private route(use: ToolUseBlock, inputError: string | undefined): { result: ToolResultBlock; ends: boolean } {
    if (inputError) {
      this.note(use, 'channel', true);
      return { result: toolResult(use.id, inputError, true), ends: false };
    }
    if (use.name === TOOL.reply) return this.replyCall(use);
    if (use.name === TOOL.skip) {
      this.outcome = 'skipped';
      return { result: toolResult(use.id, 'skipped'), ends: true };
    }
    if (isServerToolName(use.name)) return { result: this.serverToolCall(use), ends: false };
    // Keel's own tools that would start work (a delegate, a Schedule) are never run by an evaluation.
    const recorded = this.recorded?.results[use.id];
    if (recorded) {
      this.note(use, 'recording', !!recorded.is_error);
      return { result: recorded, ends: false };
    }
    this.note(use, 'dry-run', true);
    return { result: toolResult(use.id, `dry run: ${use.name} is not performed in an evaluation`, true), ends: false };
  }

  private replyCall(use: ToolUseBlock): { result: ToolResultBlock; ends: boolean } {
    const verdict = this.guarded(typeof use.input.text === 'string' ? use.input.text : '');
    if (verdict.ok) {
      this.outcome = 'replied';
      // Nothing is delivered; the model reads what the recording read, or that the delivery was skipped.
      return { result: this.recorded?.results[use.id] ?? replyResult(use.id, 'skipped:evaluation'), ends: true };
    }
    const ends = this.corrections > LIMITS.guardCorrections;
    if (ends) this.outcome = 'error';
    return { result: toolResult(use.id, guardErrorForModel(verdict), true), ends };
  }

  /**
   * A tool server's tool under the candidate's policy: not offered (denied), waiting for a person where the
   * recording ran it at once, and answered from the recording by its tool and arguments; an unmatched call is answered
   * as a dry run. Nothing is sent to a server.
   */
  private serverToolCall(use: ToolUseBlock): ToolResultBlock {
    const tool = this.offered.candidate.find((t) => t.modelName === use.name);
    if (!tool) {
      this.note(use, 'denied', true);
      return toolResult(use.id, `unknown tool "${use.name}": it is not among the tools offered`, true);
    }
    const before = this.offered.before.find((t) => t.modelName === use.name);
    const waits = tool.policy === 'approve' && before?.policy !== 'approve';
    const found = this.results.get(toolResultKey(use.name, use.input));
    if (!found) {
      this.note(use, 'dry-run', true);
      return toolResult(use.id, `dry run: ${use.name} was not called; no recorded result has these arguments`, true);
    }
    const how: ToolAnswer = waits ? 'needs-approval' : 'recording';
    this.note(use, how, found.isError);
    return toolResult(use.id, found.content, found.isError, found.ref);
  }

  private note(use: ToolUseBlock, answeredBy: ToolAnswer, isError: boolean): void {
    if (!isTurnEnding(use.name)) this.toolCalls.push({ name: use.name, arguments: use.input, answeredBy, isError });
  }
}
