import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { recordAudit } from '../db/audit';
import { getAgent } from '../db/agents';
import { memoryVersion } from '../db/memory';
import { callSpend } from '../db/spend';
import * as db from '../db/evals';
import { inTransaction, type Pool } from '../db/pool';
import { EVAL_WORKFLOW, type EvalOutcome, type EvalWorkflow } from '../contracts/evals';
import {
  caseResult,
  EVALS,
  JUDGE_SYSTEM,
  judgeQuestion,
  judgeVerdict,
  type Candidate,
  type CaseResult,
  type EvalTurnResult,
  type Judged,
  type EvalMode,
} from '../domain/evals';
import { evalCallKey, evalConversationKey, evalWorkflowId } from '../domain/ids';
import { SA } from '../domain/search-attributes';
import { containsNul, scrub } from '../domain/text';
import { textOf } from '../domain/transcript';
import { evalConfigs } from './eval-config';
import { CaseError, takeCases, type RecordedSelection, type WrittenCase } from './eval-cases';
import type { EvalTurnDeps } from './eval-turn';
import { askQuestion } from './model-call';
import type { Step } from './step';

export interface EvalRequest {
  mode: EvalMode;
  candidate: Candidate;
  suite?: string;
  recorded?: RecordedSelection;
  written?: WrittenCase[];
}

/**
 * Starts an evaluation: its cases are taken now (a recorded conversation as it stands), kept, and run by a workflow.
 * The candidate is kept with it and never applied to the agent. Answers undefined when the agent is unknown.
 */
export async function startEval(
  pool: Pool,
  temporal: Client,
  taskQueue: string,
  asked: EvalRequest & { agentId: string; actor: string },
): Promise<db.EvalRow | undefined> {
  // jsonb refuses NUL and lone surrogates: NUL is refused, a lone surrogate kept as U+FFFD, as Keel keeps outside text.
  if (containsNul(asked)) throw new CaseError('an evaluation must not contain the NUL character (U+0000)', 400);
  const ask = scrub(asked);
  const { agentId } = ask;
  if (!(await getAgent(pool, agentId))) return undefined;
  await candidateKnown(pool, agentId, ask.candidate);
  const cases = await takeCases(pool, agentId, ask);
  const configs = await evalConfigs(pool, agentId, ask.candidate);
  const id = randomUUID();
  const row = await inTransaction(pool, async (q) => {
    const made = await db.insertEval(q, {
      id,
      agentId,
      mode: ask.mode,
      candidate: ask.candidate,
      configs,
      suite: ask.suite ?? null,
      actor: ask.actor,
    });
    await db.insertEvalCases(q, id, cases);
    await recordAudit(q, {
      agentId,
      actor: ask.actor,
      action: 'eval.start',
      subject: id,
      detail: { mode: ask.mode, cases: cases.length, suite: ask.suite ?? null },
    });
    return made;
  });
  try {
    await temporal.workflow.start<EvalWorkflow>(EVAL_WORKFLOW, {
      taskQueue,
      workflowId: evalWorkflowId(agentId, id),
      // Found with the agent's work: an agent's deletion ends it.
      typedSearchAttributes: [
        { key: SA.agentId, value: agentId },
        { key: SA.kind, value: 'eval' },
      ],
      args: [{ agentId, evalId: id, cases: cases.map((c) => ({ caseId: c.id, turns: c.turns.length })) }],
    });
  } catch (err) {
    // Not started: the evaluation says so, rather than run for ever.
    await db.failEval(
      pool,
      id,
      `its workflow could not be started: ${err instanceof Error ? err.message : String(err)}`,
    );
    throw err;
  }
  return row;
}

/** A candidate's memory version must be one of the agent's: refused at once, not found by each case. */
export async function candidateKnown(pool: Pool, agentId: string, candidate: Candidate): Promise<void> {
  const version = candidate.memoryVersion;
  if (version !== undefined && !(await memoryVersion(pool, agentId, version)))
    throw new CaseError(`agent ${agentId} has no memory version ${version}`, 400);
}

/** The agent's latest evaluations, newest first. */
export const latestEvals = (pool: Pool, agentId: string) => db.listEvals(pool, agentId, EVALS.listed);

/** An evaluation with its cases' verdicts. */
export async function evalView(pool: Pool, agentId: string, evalId: string) {
  const found = await db.getEval(pool, agentId, evalId);
  if (!found) return undefined;
  return { ...found, cases: await db.evalCases(pool, evalId) };
}

/** One case side by side: what it holds (the recording) and what the candidate did, turn by turn. */
export async function evalCaseView(pool: Pool, agentId: string, evalId: string, caseId: string) {
  if (!(await db.getEval(pool, agentId, evalId))) return undefined;
  const found = await db.evalCase(pool, evalId, caseId).catch(() => undefined);
  if (!found) return undefined;
  const turns = await db.evalTurns(pool, evalId, caseId);
  return {
    caseId,
    source: found.spec.source,
    status: found.status,
    result: found.result,
    turns: found.spec.turns.map((t, i) => ({
      turn: i + 1,
      recorded: t.recorded ? { rows: t.recorded.rows, outcome: t.recorded.outcome, reply: t.recorded.reply } : null,
      candidate: turns.find((r) => r.turn === i + 1) ?? null,
    })),
  };
}

/**
 * A judge's verdict on the case's turns, asked once: its answer is kept with its spending, so a retried step reads it
 * instead of paying again.
 */
async function judge(
  deps: EvalTurnDeps,
  evaluation: db.EvalRow,
  input: { evalId: string; caseId: string },
  index: number,
  check: { rubric: string; model?: string },
  turns: EvalTurnResult[],
  step: Step,
): Promise<Judged> {
  const { pool } = deps;
  const { evalId, caseId } = input;
  const callKey = evalCallKey.judge(evalId, caseId, index);
  const conversationKey = evalConversationKey(evalId, caseId);
  if (!(await db.evalAnswer(pool, callKey)))
    await askQuestion(
      deps,
      {
        model: check.model ?? evaluation.configs.candidate.model ?? deps.defaultModel,
        system: JUDGE_SYSTEM,
        text: judgeQuestion(check.rubric, turns),
        maxTokens: EVALS.judgeMaxTokens,
      },
      {
        callKey,
        payer: { agentId: evaluation.agentId, kind: 'eval', conversationKey },
        asker: {
          attempt: step.attempt,
          conversationKey,
          turnId: 'judge',
          callIndex: index + 1,
          heartbeat: () => step.heartbeat(),
          signal: step.signal,
          sleep: (ms) => step.sleep(ms),
        },
        keep: (q, res) => db.keepEvalAnswer(q, { callKey, evalId, caseId, content: res.content }),
      },
    );
  const [kept, spend] = await Promise.all([db.evalAnswer(pool, callKey), callSpend(pool, callKey)]);
  return { ...judgeVerdict(textOf(kept ?? [])), costUsd: spend?.costUsd ?? 0 };
}

/** A case's verdict from its turns: the recording's changes, its checks, and a judge where it asks for one. */
export async function scoreEvalCase(
  deps: EvalTurnDeps,
  input: { evalId: string; caseId: string },
  step: Step,
): Promise<{ passed: boolean }> {
  const { pool } = deps;
  const [{ evaluation, spec }, turns] = await Promise.all([
    db.evalCase(pool, input.evalId, input.caseId),
    db.evalTurns(pool, input.evalId, input.caseId),
  ]);
  const judged: Judged[] = [];
  for (const [i, check] of spec.checks.entries())
    if ('judge' in check) judged.push(await judge(deps, evaluation, input, i, check.judge, turns, step));
  const result: CaseResult = caseResult(spec, turns, judged);
  await db.setCaseResult(pool, input.evalId, input.caseId, result);
  return { passed: result.passed };
}

export async function finishEvaluation(pool: Pool, input: { evalId: string }): Promise<EvalOutcome> {
  const summary = await db.finishEval(pool, input.evalId);
  return { cases: summary.cases, passed: summary.passed, failed: summary.failed };
}

export async function failEvaluation(pool: Pool, input: { evalId: string; reason: string }): Promise<void> {
  await db.failEval(pool, input.evalId, input.reason);
}
