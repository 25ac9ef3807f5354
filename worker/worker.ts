import type { DataConverter } from '@temporalio/common';
import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';
import type { WorkerCapacity, WorkerDeployment } from '../domain/config';
import { noteWorkflowTaskFailure } from '../services/workflow-task-failures';
import { WORKFLOWS_PATH, type WorkflowSource } from './bundle';
import { onFailedWorkflowTask } from './logger';

export async function createKeelWorker(opts: {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  /** The activities' dependencies; the workflow code they replay histories against is this worker's own. */
  deps: Omit<ActivityDeps, 'workflows'>;
  workflows?: WorkflowSource;
  /** The cache and slots (KEEL_WORKER_*); the SDK's defaults when unset. */
  capacity?: WorkerCapacity;
  /** Run as this Worker Deployment version (KEEL_BUILD_ID); unversioned when unset. */
  deployment?: WorkerDeployment;
  /** The payload codecs every payload passes through (services/payload-encryption.ts); clear text when unset. */
  dataConverter?: DataConverter;
  extra?: Partial<WorkerOptions>;
}): Promise<Worker> {
  const capacity = opts.capacity;
  const workflows = opts.workflows ?? { workflowsPath: WORKFLOWS_PATH };
  const worker = await Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    ...workflows,
    activities: createActivities({ ...opts.deps, workflows }),
    ...(opts.dataConverter ? { dataConverter: opts.dataConverter } : {}),
    // Cancellation reaches an activity only with a heartbeat's answer: send them often enough that an
    // interrupting message stops a streaming model call within about a second.
    maxHeartbeatThrottleInterval: '1 second',
    // A killed worker's cached workflows move to another worker after this (the SDK's default is 10 s).
    stickyQueueScheduleToStartTimeout: '3 seconds',
    ...(capacity ? { maxCachedWorkflows: capacity.cachedWorkflows } : {}),
    ...(capacity?.tuner
      ? { tuner: { tunerOptions: capacity.tuner } }
      : capacity
        ? {
            maxConcurrentWorkflowTaskExecutions: capacity.workflowTaskSlots,
            maxConcurrentActivityTaskExecutions: capacity.activitySlots,
            maxConcurrentLocalActivityExecutions: capacity.localActivitySlots,
          }
        : {}),
    ...(opts.deployment
      ? {
          workerDeploymentOptions: {
            useWorkerVersioning: true,
            version: { deploymentName: opts.deployment.name, buildId: opts.deployment.buildId },
            // A run stays on the build it started on, so a deploy never replays its history on other code. The
            // reflection entity, which never ends, declares AUTO_UPGRADE itself (workflows/reflection.ts).
            defaultVersioningBehavior: 'PINNED' as const,
          },
        }
      : {}),
    ...opts.extra,
  });
  // Each workflow task this worker fails is recorded for /metrics and the console, for as long as it runs.
  const where = { namespace: opts.namespace, taskQueue: opts.taskQueue };
  const stop = onFailedWorkflowTask((failed) => {
    noteWorkflowTaskFailure(opts.deps.pool, opts.connection.workflowService, where, failed).catch((err: unknown) =>
      console.error(`keel worker: could not record a failed workflow task of run ${failed.runId}:`, err),
    );
  });
  const run = worker.run.bind(worker);
  worker.run = () => run().finally(stop);
  return worker;
}
