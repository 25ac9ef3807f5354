// Keel's workflows, but a job's run started by "run now" begins, then fails every workflow task (a test-only fault):
// a run stuck as a nondeterminism error left one in issue 24, while the Schedule's own fires run as usual
// (test/job-run-stuck.test.ts).
import { workflowInfo } from '@temporalio/workflow';
import type { JobRunInput } from '../../contracts/job-run';
import { store } from '../../workflows/activities';
import { jobRunWorkflow as keelJobRun } from '../../workflows/job-run';

export * from '../../workflows';

export async function jobRunWorkflow(input: JobRunInput): Promise<void> {
  const { workflowId, startTime } = workflowInfo();
  if (!workflowId.includes('-now-')) return keelJobRun(input);
  await store.beginJobRun({ runId: workflowId, jobId: input.jobId, firedAt: startTime.toISOString() });
  throw new TypeError('test fault: every workflow task of this run fails');
}
