/** The run of a scheduled job, as its Temporal Schedule starts it. */
export const JOB_RUN_WORKFLOW = 'jobRunWorkflow';

export interface JobRunInput {
  jobId: string;
}

export type JobRunWorkflow = (input: JobRunInput) => Promise<void>;
