import * as jobRun from '../services/job-run';
import type { StepInput } from '../services/step';

export function jobRunActivities(deps: jobRun.JobRunDeps) {
  // Each activity is its step in services/job-run.ts, with this worker's dependencies.
  return {
    scheduleJobs: (input: StepInput<typeof jobRun.scheduleJobs>) => jobRun.scheduleJobs(deps, input),
    beginJobRun: (input: StepInput<typeof jobRun.beginJobRun>) => jobRun.beginJobRun(deps, input),
    askForJobTurn: (input: StepInput<typeof jobRun.askForJobTurn>) => jobRun.askForJobTurn(deps, input),
    jobTurnResult: (input: StepInput<typeof jobRun.jobTurnResult>) => jobRun.jobTurnResult(deps, input),
    reportStuckJobTurn: (input: StepInput<typeof jobRun.reportStuckJobTurn>) => jobRun.reportStuckJobTurn(deps, input),
    runJobTurn: (input: StepInput<typeof jobRun.runJobTurn>) => jobRun.runJobTurn(deps, input),
    recordJobRunError: (input: StepInput<typeof jobRun.recordJobRunError>) => jobRun.recordJobRunError(deps, input),
    markJobRunBudgetBlocked: (input: StepInput<typeof jobRun.markJobRunBudgetBlocked>) =>
      jobRun.markJobRunBudgetBlocked(deps, input),
    deliverJobResult: (input: StepInput<typeof jobRun.deliverJobResult>) => jobRun.deliverJobResult(deps, input),
    bookJobRun: (input: StepInput<typeof jobRun.bookJobRun>) => jobRun.bookJobRun(deps, input),
    failJob: (input: StepInput<typeof jobRun.failJob>) => jobRun.failJob(deps, input),
  };
}
