import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';

/**
 * A test hook, bundled into the workflow code of one test only: delegates' completion signals to their conversation
 * are dropped, as a lost signal would be. The outcome is still committed; only the notification disappears.
 */
export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      signalWorkflow: (input, next) => (input.signalName === 'delegateFinished' ? Promise.resolve() : next(input)),
    },
  ],
});
