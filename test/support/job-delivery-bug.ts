import { ApplicationFailure, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

/**
 * A test hook, bundled into the workflow code of one test only: a bug in the job run workflow, which fails the run
 * when it is about to deliver the job's result. The reset test fixes it (a worker with the real code) and resets.
 */
export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      scheduleActivity: (input, next) => {
        if (input.activityType === 'deliverJobResult')
          throw ApplicationFailure.nonRetryable('a bug in the job run workflow', 'KeelTestBug');
        return next(input);
      },
    },
  ],
});
