/**
 * Reflection as a person reads and decides it: its proposals, a decision on one waiting for approval, and the state
 * of an agent's reflection. What reflection does with a proposal is services/reflection.ts and
 * services/proposal-admission.ts.
 */
import type { Client } from '@temporalio/client';
import { decideProposal, reflectionState, type ReflectionState } from '../contracts/reflection';
import type { Pool } from '../db/pool';
import { gateLog, getProposal, listPoisoned, spentToday, type ProposalRow, type ProposalStatus } from '../db/proposals';
import { reflectionWorkflowId } from '../domain/ids';
import { decisionAudit, submitDecision, type DecisionAnswer } from './approvals';

// Reads the API serves as they are.
export { listProposals, type ProposalRow } from '../db/proposals';

/** How a person's decision on a proposal fared: the proposal as it stands after it, or why it was not taken. */
export type ProposalDecisionAnswer =
  | { ok: true; proposal: ProposalRow }
  | { ok: false; why: 'not_found' }
  | { ok: false; why: 'not_awaiting_approval'; status: ProposalStatus }
  | { ok: false; why: Exclude<DecisionAnswer, 'taken'> };

/**
 * A person approves or rejects a proposal of the agent's that waits for approval: the decision goes to the reflection
 * workflow waiting for it (which checks an approved proposal again and applies it), then into the audit trail.
 */
export async function decideOnProposal(
  pool: Pool,
  temporal: Client,
  deadlineMs: number,
  d: { agentId: string; proposalId: string; approved: boolean; note: string | undefined; actor: string },
): Promise<ProposalDecisionAnswer> {
  const { agentId, proposalId: id } = d;
  const p = await getProposal(pool, id);
  if (!p || p.agentId !== agentId) return { ok: false, why: 'not_found' };
  if (p.status !== 'awaiting_approval') return { ok: false, why: 'not_awaiting_approval', status: p.status };
  const decision = { proposalId: id, approved: d.approved, ...(d.note ? { note: d.note } : {}) };
  const answer = await submitDecision(
    temporal,
    deadlineMs,
    () => temporal.workflow.getHandle(p.workflowId).executeUpdate(decideProposal, { args: [decision] }),
    { pool, entry: decisionAudit('proposal', { ...d, subject: id }) },
  );
  if (answer !== 'taken') return { ok: false, why: answer };
  return { ok: true, proposal: (await getProposal(pool, id))! };
}

/** The state of the agent's reflection, as a person reads it. */
export interface ReflectionOverview extends ReflectionState {
  /** false: the workflow could not be asked (none yet, or Temporal unreachable); queued and drains are then empty. */
  live: boolean;
  poisoned: Awaited<ReturnType<typeof listPoisoned>>;
  gateLog: Awaited<ReturnType<typeof gateLog>>;
  spentTodayUsd: number;
}

/**
 * The state of the agent's reflection: its workflow's queue and drains, as the workflow answers, then the poison
 * list, the gate's decisions and today's spending that PostgreSQL holds.
 */
export async function reflectionOverview(pool: Pool, temporal: Client, agentId: string): Promise<ReflectionOverview> {
  const live = await temporal.workflow
    .getHandle(reflectionWorkflowId(agentId))
    .query(reflectionState)
    .then((state) => ({ ...state, live: true }))
    // No reflection workflow yet, or Temporal unreachable: the state PostgreSQL holds, marked so.
    .catch(() => ({ queued: [], draining: false, awaiting: null, drains: 0, lastDrain: null, live: false }));
  return {
    ...live,
    poisoned: await listPoisoned(pool, agentId),
    gateLog: await gateLog(pool, agentId),
    spentTodayUsd: await spentToday(pool, agentId),
  };
}
