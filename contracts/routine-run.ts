/** The run of a routine, as its Temporal Schedule (or "run now") starts it and a human decides its gates. */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { Gate, RoutineRunResult } from '../domain/routines';

export const ROUTINE_RUN_WORKFLOW = 'routineRunWorkflow';

export interface RoutineRunInput {
  agentId: string;
  appId: string;
  slug: string;
}

export type RoutineRunOutcome = RoutineRunResult | { status: 'skipped'; reason: string };
export type RoutineRunWorkflow = (input: RoutineRunInput) => Promise<RoutineRunOutcome>;

export interface ApprovalDecision {
  approved: boolean;
  note?: string;
}

/** A human's answer to a run waiting at a gate. The validator refuses it when the run is not waiting. */
export const decideApproval = defineUpdate<{ approved: boolean }, [ApprovalDecision]>('decideApproval');
export const waitingGate = defineQuery<Gate | null>('waitingGate');
