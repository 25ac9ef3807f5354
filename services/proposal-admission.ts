import { ApplicationFailure } from '@temporalio/common';
import type { AdmitResult } from '../contracts/reflection';
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
import type { Proposal, ProposalAnswer, QueuedSummary, ReflectionSettings } from '../domain/reflection';

/** What admission reads: PostgreSQL and reflection's settings (its gates, approval files and wait). */
export interface AdmissionDeps {
  pool: Pool;
  reflection: ReflectionSettings;
}

/**
 * Admission: every gate runs against the current memory; one hard failure rejects the proposal whole. An admitted
 * proposal becomes the next memory version in the same transaction, unless a file it touches waits for a human.
 */
export async function admitProposal(
  deps: AdmissionDeps,
  input: {
    agentId: string;
    workflowId: string;
    proposalId: string;
    answer: ProposalAnswer;
    summaries: QueuedSummary[];
    tier: string;
    judges?: JudgeVerdict[];
  },
): Promise<AdmitResult> {
  const { pool, reflection: s } = deps;
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
}

/** A human's decision on a waiting proposal: approve re-checks it against the memory of now and applies it. */
export async function decideProposal(
  deps: AdmissionDeps,
  input: {
    agentId: string;
    proposalId: string;
    approved: boolean;
    note?: string;
  },
): Promise<AdmitResult> {
  const { pool, reflection: s } = deps;
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
}

/** Summaries rejected three times: off the queue, onto the poison list, with the proposal that failed. */
export async function poisonSummaries(
  deps: AdmissionDeps,
  input: {
    agentId: string;
    proposalId: string;
    summaries: QueuedSummary[];
  },
): Promise<void> {
  await inTransaction(deps.pool, async (db) => {
    await proposalsDb.poisonSummaries(db, input.agentId, input.summaries, input.proposalId);
    await proposalsDb.settleProposal(db, input.proposalId, { status: 'poisoned' });
  });
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
