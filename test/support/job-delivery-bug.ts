import { ApplicationFailure, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

/**
 * A test hook, bundled into the workflow code of one test only: a bug in the job run workflow, which fails the run
 * when it is about to deliver the job's result, or right after a step that delivered it (a run at once). The reset
 * test fixes it (a worker with the real code) and resets.
 */
const bug = () => ApplicationFailure.nonRetryable('a bug in the job run workflow', 'KeelTestBug');
/** The steps that deliver a result: from job-run-fewer-steps, deliverJobTurn reads the turn's end and delivers. */
const DELIVERING = new Set(['deliverJobResult', 'deliverJobTurn']);

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      scheduleActivity: (input, next) => {
        if (DELIVERING.has(input.activityType)) throw bug();
        return next(input);
      },
      // A run's delivery is a local step from issue 27's shape.
      scheduleLocalActivity: async (input, next) => {
        if (DELIVERING.has(input.activityType)) throw bug();
        const result = await next(input);
        // From job-run-at-once, the run's first step delivers the result itself: the bug fails the run after it.
        if (input.activityType === 'runJobAtOnce') throw bug();
        return result;
      },
    },
  ],
});
