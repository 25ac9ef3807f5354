import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/** Resolves once the API answers /healthz and a worker polls the task queue (so the first request is served). */
export async function waitForReady(
  healthUrl: string,
  temporalAddress: string,
  namespace: string,
  taskQueue: string,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const connection = await Connection.connect({ address: temporalAddress });
  try {
    for (;;) {
      const apiUp = await fetch(healthUrl).then(
        (r) => r.ok,
        () => false,
      );
      const { pollers } = await connection.workflowService.describeTaskQueue({
        namespace,
        taskQueue: { name: taskQueue },
        taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
      });
      if (apiUp && pollers.length > 0) return;
      if (Date.now() > deadline)
        throw new Error(`the ${apiUp ? 'worker' : 'API'} did not become ready in ${timeoutMs / 1000} s`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await connection.close();
  }
}
