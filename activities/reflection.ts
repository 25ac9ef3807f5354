import { ApplicationFailure } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import { REFLECTION_WORKFLOW, turnFinished, type AdmitResult, type ReflectionWorkflow } from '../contracts/reflection';
import { listMessages } from '../db/conversations';
import { lockAgent } from '../db/agents';
import { currentMemory, memoryVersion, writeVersion } from '../db/memory';
import { inTransaction, type Pool } from '../db/pool';
import * as proposalsDb from '../db/proposals';
import {
  applyEdits,
  checkProposal,
  hardFailures,
  judgesCheck,
  type Check,
  type JudgeVerdict,
} from '../domain/admission';
import type { TurnEnd } from '../domain/conversation';
import { conversationWorkflowId, reflectionWorkflowId } from '../domain/ids';
import type { ModelProvider } from '../domain/model';
import { textOf } from '../domain/transcript';
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
import { askFromActivity } from './model/ask';
import type { SpendDeps } from './model/metered';
import type { PriceTable } from '../domain/spend';
import type { Transports } from './delivery/deliver-reply';

export interface ReflectionDeps {
  pool: Pool;
  provider: ModelProvider;
  reflection: ReflectionSettings;
  /** What its calls cost against the agent's budgets (docs/spend.md); reflection's own ceiling uses its prices. */
  prices: PriceTable;
  /** How the owner hears that a budget stopped a call. */
  transports?: Transports;
  rates?: SpendDeps['rates'];
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
): Promise<void> {
  const c = await proposalsDb.turnToReflect(pool, conversationKey, turnId);
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

export function reflectionActivities(deps: ReflectionDeps) {
  const { pool, provider } = deps;
  const s = deps.reflection;

  /** One model call of reflection, its cost booked under its call key (a retried call books once). */
  async function ask(
    agentId: string,
    callKey: string,
    purpose: 'gate' | 'reflection' | 'judge',
    model: string,
    system: string,
    message: string,
    maxTokens: number,
  ): Promise<string> {
    const res = await askFromActivity(
      provider,
      { model, system, text: message, maxTokens },
      { conversationKey: reflectionWorkflowId(agentId), turnId: callKey, callIndex: 1 },
      {
        deps: { pool, prices: deps.prices, transports: deps.transports, rates: deps.rates },
        callKey: `reflect:${callKey}`,
        payer: { agentId, kind: purpose },
      },
    );
    const cost = costUsd(res.usage, s.prices);
    await proposalsDb.recordCost(pool, { callKey, agentId, purpose, model, usage: res.usage, costUsd: cost });
    return textOf(res.content);
  }

  return {
    reflectionSettings: async (): Promise<ReflectionSettings> => s,

    /** "Worth learning?": one cheap call; an error means yes. Every decision is logged. */
    gateTurn: async (input: {
      agentId: string;
      summary: TurnSummary;
    }): Promise<{ evolve: boolean; reason: string }> => {
      const key = conversationWorkflowId(input.agentId, input.summary.conversationId);
      const messages = await listMessages(pool, key, 0, 10_000);
      const users = messages.filter((m) => m.role === 'user');
      const replies = messages.filter((m) => m.role === 'assistant' && m.text);
      let decision: { evolve: boolean; reason: string };
      try {
        const answer = await ask(
          input.agentId,
          `gate:${input.summary.turnId}`,
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
    },

    /** The reflection call of one tier: the queued turns' messages read from PostgreSQL, the memory, one answer. */
    proposeReflection: async (input: {
      agentId: string;
      proposalId: string;
      summaries: QueuedSummary[];
      tier: number;
    }): Promise<ProposeResult> => {
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
        input.agentId,
        `${input.proposalId}:tier${input.tier}`,
        'reflection',
        model,
        REFLECTION_SYSTEM,
        reflectionMessage(memory.files, conversations),
        8_192,
      );
      const parsed = parseProposal(answer);
      return parsed.ok ? { kind: 'answer', answer: parsed.proposal } : { kind: 'unreadable', error: parsed.error };
    },

    /** The optional judge panel: each judge one call; an error is recorded as such (it fails closed). */
    judgeProposal: async (input: {
      agentId: string;
      proposalId: string;
      proposal: Proposal;
    }): Promise<JudgeVerdict[]> => {
      const memory = await currentMemory(pool, input.agentId);
      const edits = JSON.stringify(input.proposal.edits, null, 2);
      const message = `Constitution:\n${memory.files['constitution.md'] ?? ''}\n\nProposed edits:\n${edits}`;
      return Promise.all(
        Array.from({ length: s.judges }, async (_, i): Promise<JudgeVerdict> => {
          try {
            const o = JSON.parse(
              /\{[\s\S]*\}/.exec(
                await ask(
                  input.agentId,
                  `${input.proposalId}:judge${i + 1}`,
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
    },

    /**
     * Admission: every gate runs against the current memory; one hard failure rejects the proposal whole. An admitted
     * proposal becomes the next memory version in the same transaction, unless a file it touches waits for a human.
     */
    admitProposal: async (input: {
      agentId: string;
      workflowId: string;
      proposalId: string;
      answer: ProposalAnswer;
      summaries: QueuedSummary[];
      tier: string;
      judges?: JudgeVerdict[];
    }): Promise<AdmitResult> => {
      return inTransaction(pool, async (db) => {
        await lockAgent(db, input.agentId);
        const done = await proposalsDb.getProposal(db, input.proposalId);
        if (done) return resultOf(done);
        const memory = await currentMemory(db, input.agentId);
        const conversationIds = input.summaries.map((q) => q.conversationId);
        const record = (status: proposalsDb.ProposalStatus, checks: Check[]) =>
          proposalsDb.insertProposal(db, {
            id: input.proposalId,
            agentId: input.agentId,
            workflowId: input.workflowId,
            status,
            answer: input.answer,
            checks,
            baseVersion: memory.version,
            tier: input.tier,
            conversationIds,
            // The workflow read its wait from these same settings (reflectionSettings) as its run began.
            approvalWaitMs: s.approvalWaitMs,
          });
        if (input.answer.status !== 'ok') {
          await record('skipped', []);
          return { status: 'skipped' };
        }
        const checks = checkProposal(memory.files, input.answer, { urlAllowlist: s.urlAllowlist });
        if (input.judges && hardFailures(checks).length === 0) checks.push(judgesCheck(input.judges));
        if (hardFailures(checks).length) {
          await record('rejected', checks);
          return { status: 'rejected', checks };
        }
        const waiting = [...new Set(input.answer.edits.map((e) => e.file).filter((f) => s.approvalFiles.includes(f)))];
        if (waiting.length) {
          await record('awaiting_approval', [
            ...checks,
            {
              name: 'human_approval',
              kind: 'hard',
              passed: false,
              detail: `waiting for approval of ${waiting.join(', ')}`,
            },
          ]);
          return { status: 'awaiting_approval', files: waiting };
        }
        await record('admitted', checks);
        const version = await apply(db, input.agentId, input.proposalId, memory.files, input.answer, conversationIds);
        return { status: 'admitted', version };
      });
    },

    /** A human's decision on a waiting proposal: approve re-checks it against the memory of now and applies it. */
    decideProposal: async (input: {
      agentId: string;
      proposalId: string;
      approved: boolean;
      note?: string;
    }): Promise<AdmitResult> => {
      return inTransaction(pool, async (db) => {
        await lockAgent(db, input.agentId);
        const p = await proposalsDb.getProposal(db, input.proposalId);
        if (!p) throw ApplicationFailure.nonRetryable(`proposal ${input.proposalId} not found`);
        if (p.status !== 'awaiting_approval') return resultOf(p);
        const decision = { approved: input.approved, ...(input.note ? { note: input.note } : {}) };
        const approval: Check = {
          name: 'human_approval',
          kind: 'hard',
          passed: input.approved,
          detail: `${input.approved ? 'approved' : 'rejected'}${input.note ? `: ${input.note}` : ''}`,
        };
        const earlier = p.checks.filter((c) => c.name !== 'human_approval');
        if (!input.approved || p.answer.status !== 'ok') {
          await proposalsDb.settleProposal(db, p.id, { status: 'rejected', checks: [...earlier, approval], decision });
          return { status: 'rejected', checks: [...earlier, approval] };
        }
        // The memory may have moved on (a rollback, say) while the proposal waited: a touched file that changed since
        // the proposal was made makes it stale (applying it would undo that change); the gates run again on the rest.
        const memory = await currentMemory(db, input.agentId);
        const base = await memoryVersion(db, input.agentId, p.baseVersion);
        const moved = [...new Set(p.answer.edits.map((e) => e.file))].filter((f) => base?.files[f] !== memory.files[f]);
        const stale: Check = moved.length
          ? {
              name: 'base_unchanged',
              kind: 'hard',
              passed: false,
              detail: `changed since the proposal was made: ${moved.join(', ')}`,
            }
          : { name: 'base_unchanged', kind: 'hard', passed: true };
        const checks = [...checkProposal(memory.files, p.answer, { urlAllowlist: s.urlAllowlist }), stale, approval];
        if (hardFailures(checks).length) {
          await proposalsDb.settleProposal(db, p.id, { status: 'rejected', checks, decision });
          return { status: 'rejected', checks };
        }
        const version = await apply(db, input.agentId, p.id, memory.files, p.answer, p.conversationIds);
        await proposalsDb.settleProposal(db, p.id, { status: 'admitted', version, checks, decision });
        return { status: 'admitted', version };
      });
    },

    /** Summaries rejected three times: off the queue, onto the poison list, with the proposal that failed. */
    poisonSummaries: async (input: {
      agentId: string;
      proposalId: string;
      summaries: QueuedSummary[];
    }): Promise<void> => {
      await inTransaction(pool, async (db) => {
        await proposalsDb.poisonSummaries(db, input.agentId, input.summaries, input.proposalId);
        await proposalsDb.settleProposal(db, input.proposalId, { status: 'poisoned' });
      });
    },
  };
}

async function apply(
  db: Parameters<typeof writeVersion>[0],
  agentId: string,
  proposalId: string,
  files: Record<string, string>,
  proposal: Proposal,
  learnedFrom: string[],
): Promise<number> {
  const written = await writeVersion(db, agentId, {
    files: applyEdits(files, proposal),
    kind: 'proposal',
    proposalId,
    changes: proposal.edits.map(({ content: _content, ...change }) => change),
    learnedFrom: [...new Set([...learnedFrom, ...proposal.edits.flatMap((e) => e.conversationIds)])],
  });
  await proposalsDb.settleProposal(db, proposalId, { status: 'admitted', version: written.version });
  return written.version;
}

function resultOf(p: proposalsDb.ProposalRow): AdmitResult {
  switch (p.status) {
    case 'admitted':
      return { status: 'admitted', version: p.version ?? 0 };
    case 'awaiting_approval':
      return { status: 'awaiting_approval', files: [] };
    case 'skipped':
      return { status: 'skipped' };
    default:
      return { status: 'rejected', checks: p.checks };
  }
}
