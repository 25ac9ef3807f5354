/** The run of a scheduled job, as its Temporal Schedule starts it, and the signal its task's conversation sends it. */
import { defineSignal } from '@temporalio/workflow';

export const JOB_RUN_WORKFLOW = 'jobRunWorkflow';

export interface JobRunInput {
  jobId: string;
}

export type JobRunWorkflow = (input: JobRunInput) => Promise<void>;

/** Sent by the job's conversation once the turn answering `messageId` has ended and its end is committed. */
export const jobTurnEnded = defineSignal<[{ messageId: string }]>('jobTurnEnded');

/** How a job's turn ended, as its run books it. */
export type TurnResult =
  | { status: 'ok'; text: string }
  | { status: 'error'; error: string }
  /** A budget stopped the turn: not the job's failure (docs/spend.md). */
  | { status: 'budget'; error: string };
