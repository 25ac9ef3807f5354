/** An evaluation as the API starts it: a workflow, with a child per case (services/evals.ts takes the cases). */
export const EVAL_WORKFLOW = 'evalWorkflow';
export const EVAL_CASE_WORKFLOW = 'evalCaseWorkflow';

export interface EvalInput {
  agentId: string;
  evalId: string;
  /** The cases, by id, each with its count of turns. */
  cases: { caseId: string; turns: number }[];
}

export interface EvalCaseInput {
  evalId: string;
  caseId: string;
  turns: number;
}

/** What an evaluation ends with: counts (the cases' verdicts are in PostgreSQL). */
export interface EvalOutcome {
  cases: number;
  passed: number;
  failed: number;
}

export type EvalWorkflow = (input: EvalInput) => Promise<EvalOutcome>;
export type EvalCaseWorkflow = (input: EvalCaseInput) => Promise<{ passed: boolean }>;
