import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';

/**
 * A test hook, bundled into the workflow code of one test only: a conversation fails its workflow task on every
 * delegate completion signal, so once one arrives it is stuck, as a nondeterminism error left one in issue 24.
 */
export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [
    {
      handleSignal: (input, next) => {
        if (input.signalName === 'delegateFinished') {
          throw new TypeError('test fault: this conversation cannot take a delegate result');
        }
        return next(input);
      },
    },
  ],
});
