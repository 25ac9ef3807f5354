/**
 * An agent's reflection workflow as its callers see it: each finished turn of a user conversation is signalled to it,
 * and a human decides the proposals that wait for approval.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { Check } from '../domain/admission';
import type { QueuedSummary, TurnSummary } from '../domain/reflection';

export const REFLECTION_WORKFLOW = 'reflectionWorkflow';

export interface ReflectionInput {
  agentId: string;
  /** Carried over continue-as-new. */
  queue?: QueuedSummary[];
  nextDrainAt?: number;
}

export type ReflectionWorkflow = (input: ReflectionInput) => Promise<void>;

export const turnFinished = defineSignal<[TurnSummary]>('turnFinished');

export interface ProposalDecision {
  proposalId: string;
  approved: boolean;
  note?: string;
}

/** How admission ended for a proposal: the answer of `decideProposal` too. */
export type AdmitResult =
  | { status: 'admitted'; version: number }
  | { status: 'rejected'; checks: Check[] }
  | { status: 'awaiting_approval'; files: string[] }
  | { status: 'skipped' };

/** A human's answer to a proposal waiting for approval; the validator refuses any other proposal. */
export const decideProposal = defineUpdate<AdmitResult, [ProposalDecision]>('decideProposal');

/** How the last drain ended, for operators (and tests) to see a drain that stopped. */
export type LastDrain =
  | { outcome: 'proposal'; proposalId: string; status: AdmitResult['status'] }
  | { outcome: 'ceiling_reached'; spentUsd: number; ceilingUsd: number }
  | { outcome: 'unreadable'; error: string }
  | { outcome: 'escalation_exhausted' }
  | { outcome: 'model_failed'; error: string };

export interface ReflectionState {
  queued: QueuedSummary[];
  draining: boolean;
  awaiting: string | null;
  drains: number;
  lastDrain: LastDrain | null;
}

export const reflectionState = defineQuery<ReflectionState>('reflectionState');
