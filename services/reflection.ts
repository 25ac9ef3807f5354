import type { Client } from '@temporalio/client';
import type { Transports } from '../adapters/delivery/transport';
import { REFLECTION_WORKFLOW, turnFinished, type ReflectionWorkflow } from '../contracts/reflection';
import { listMessages } from '../db/conversations';
import { currentMemory } from '../db/memory';
import type { Pool } from '../db/pool';
import * as proposalsDb from '../db/proposals';
import type { JudgeVerdict } from '../domain/admission';
import type { TurnEnd } from '../domain/conversation';
import { conversationWorkflowId, reflectionCallKey, reflectionWorkflowId } from '../domain/ids';
import {
  costUsd,
  GATE_SYSTEM,
  gateMessage,
  isUserConversation,
  JUDGE_SYSTEM,
  parseGate,
  parseProposal,
  REFLECTION_SYSTEM,
  reflectionMessage,
  type Proposal,
  type ProposalAnswer,
  type QueuedSummary,
  type ReflectionSettings,
  type TurnSummary,
} from '../domain/reflection';
import { SA } from '../domain/search-attributes';
import { textOf } from '../domain/transcript';
import { askQuestion, type ModelCallDeps } from './model-call';
import { noticingBudgetStop } from './owner-notice';
import type { Step } from './step';

/**
 * Reflection's model calls: whether a turn is worth learning from, the proposal of one tier, and the judges. Each is
 * a metered call booked under its own key, and reflection's own daily ceiling counts them too.
 */
export interface ReflectionDeps extends ModelCallDeps {
  reflection: ReflectionSettings;
  /** How the owner hears that a budget stopped a call. */
  transports: Transports;
  step: Step;
}

/**
 * After a turn of a user conversation of an agent with reflection enabled: its summary, by reference, to the agent's
 * reflection workflow (signal-with-start). Called once the turn's end is committed.
 */
export async function queueTurnForReflection(
  pool: Pool,
  activity: () => { client: Client; info: { taskQueue: string } },
  conversationKey: string,
  turnId: string,
  end: TurnEnd,
  /** The turn as the statement that ended it read it, when it did. */
  read?: proposalsDb.TurnToReflect,
): Promise<void> {
  const c = read ?? (await proposalsDb.turnToReflect(pool, conversationKey, turnId));
  if (!c?.reflectionEnabled || !isUserConversation(c.conversationId) || c.fromSeq === null || c.toSeq === null) return;
  const summary: TurnSummary = {
    conversationId: c.conversationId,
    fromSeq: c.fromSeq,
    toSeq: c.toSeq,
    outcome: end.status,
    errorReplies: c.errorReplies + (end.status === 'error' ? 1 : 0),
    turnId,
  };
  const { client, info } = activity();
  await client.workflow.signalWithStart<ReflectionWorkflow, [TurnSummary]>(REFLECTION_WORKFLOW, {
    workflowId: reflectionWorkflowId(c.agentId),
    taskQueue: info.taskQueue,
    args: [{ agentId: c.agentId }],
    signal: turnFinished,
    signalArgs: [summary],
    typedSearchAttributes: [
      { key: SA.agentId, value: c.agentId },
      { key: SA.kind, value: 'reflection' },
    ],
    memo: { agent: c.agentId },
  });
}

export type ProposeResult =
  | { kind: 'answer'; answer: ProposalAnswer }
  | { kind: 'unreadable'; error: string }
  | { kind: 'ceiling'; spentUsd: number; ceilingUsd: number };

/** One model call of reflection, its cost booked under its call key (a retried call books once). */
async function ask(
  deps: ReflectionDeps,
  agentId: string,
  callKey: string,
  purpose: 'gate' | 'reflection' | 'judge',
  model: string,
  system: string,
  message: string,
  maxTokens: number,
): Promise<string> {
  const { pool, step } = deps;
  const asker = { ...step, conversationKey: reflectionWorkflowId(agentId), turnId: callKey, callIndex: 1 };
  const res = await noticingBudgetStop(
    { pool, transports: deps.transports, agentId, step },
    askQuestion(
      deps,
      { model, system, text: message, maxTokens },
      {
        callKey: reflectionCallKey.spend(callKey),
        payer: { agentId, kind: purpose },
        asker,
      },
    ),
  );
  const cost = costUsd(res.usage, deps.reflection.prices);
  await proposalsDb.recordCost(pool, { callKey, agentId, purpose, model, usage: res.usage, costUsd: cost });
  return textOf(res.content);
}

/** "Worth learning?": one cheap call; an error means yes. Every decision is logged. */
export async function gateTurn(
  deps: ReflectionDeps,
  input: {
    agentId: string;
    summary: TurnSummary;
  },
): Promise<{ evolve: boolean; reason: string }> {
  const { pool, reflection: s } = deps;
  const key = conversationWorkflowId(input.agentId, input.summary.conversationId);
  const messages = await listMessages(pool, key, 0, 10_000);
  const users = messages.filter((m) => m.role === 'user');
  const replies = messages.filter((m) => m.role === 'assistant' && m.text);
  let decision: { evolve: boolean; reason: string };
  try {
    const answer = await ask(
      deps,
      input.agentId,
      reflectionCallKey.gate(input.summary.turnId),
      'gate',
      s.gateModel,
      GATE_SYSTEM,
      gateMessage({
        turns: new Set(messages.map((m) => m.turnId)).size,
        outcome: input.summary.outcome,
        errorReplies: input.summary.errorReplies,
        firstUser: users[0]?.text ?? '',
        lastUser: users[users.length - 1]?.text ?? '',
        lastReply: replies[replies.length - 1]?.text ?? '',
      }),
      200,
    );
    decision = parseGate(answer);
  } catch (err) {
    decision = {
      evolve: true,
      reason: `the gate failed, so yes: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
  await proposalsDb.logGateDecision(pool, {
    agentId: input.agentId,
    conversationId: input.summary.conversationId,
    turnId: input.summary.turnId,
    ...decision,
  });
  return decision;
}

/** The reflection call of one tier: the queued turns' messages read from PostgreSQL, the memory, one answer. */
export async function proposeReflection(
  deps: ReflectionDeps,
  input: {
    agentId: string;
    proposalId: string;
    summaries: QueuedSummary[];
    tier: number;
  },
): Promise<ProposeResult> {
  const { pool, reflection: s } = deps;
  const spentUsd = await proposalsDb.spentToday(pool, input.agentId);
  if (spentUsd >= s.dailyCostCeilingUsd) return { kind: 'ceiling', spentUsd, ceilingUsd: s.dailyCostCeilingUsd };
  const memory = await currentMemory(pool, input.agentId);
  const conversations = await Promise.all(
    input.summaries.map(async (q) => ({
      conversationId: q.conversationId,
      messages: await listMessages(
        pool,
        conversationWorkflowId(input.agentId, q.conversationId),
        q.fromSeq - 1,
        q.toSeq - q.fromSeq + 1,
      ),
    })),
  );
  const model = s.tiers[Math.min(input.tier, s.tiers.length - 1)] ?? 'default';
  const answer = await ask(
    deps,
    input.agentId,
    reflectionCallKey.tier(input.proposalId, input.tier),
    'reflection',
    model,
    REFLECTION_SYSTEM,
    reflectionMessage(memory.files, conversations),
    8_192,
  );
  const parsed = parseProposal(answer);
  return parsed.ok ? { kind: 'answer', answer: parsed.proposal } : { kind: 'unreadable', error: parsed.error };
}

/** The optional judge panel: each judge one call; an error is recorded as such (it fails closed). */
export async function judgeProposal(
  deps: ReflectionDeps,
  input: {
    agentId: string;
    proposalId: string;
    proposal: Proposal;
  },
): Promise<JudgeVerdict[]> {
  const { pool, reflection: s } = deps;
  const memory = await currentMemory(pool, input.agentId);
  const edits = JSON.stringify(input.proposal.edits, null, 2);
  const message = `Constitution:\n${memory.files['constitution.md'] ?? ''}\n\nProposed edits:\n${edits}`;
  return Promise.all(
    Array.from({ length: s.judges }, async (_, i): Promise<JudgeVerdict> => {
      try {
        const o = JSON.parse(
          /\{[\s\S]*\}/.exec(
            await ask(
              deps,
              input.agentId,
              reflectionCallKey.judge(input.proposalId, i + 1),
              'judge',
              s.tiers[1] ?? s.gateModel,
              JUDGE_SYSTEM,
              message,
              300,
            ),
          )?.[0] ?? '',
        ) as {
          pass?: unknown;
          confidence?: unknown;
          reason?: unknown;
        };
        if (typeof o.pass !== 'boolean' || typeof o.confidence !== 'number')
          return { ok: false, error: 'the verdict did not have pass and confidence' };
        return {
          ok: true,
          pass: o.pass,
          confidence: o.confidence,
          reason: typeof o.reason === 'string' ? o.reason : '',
        };
      } catch (err) {
        return { ok: false, error: err instanceof Error ? err.message : String(err) };
      }
    }),
  );
}
