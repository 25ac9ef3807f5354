import path from 'node:path';
import { bundleWorkflowCode, type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';

/** Where the worker gets its workflow code: a prebuilt bundle (tests build one per run) or the sources. */
export type WorkflowSource = { workflowBundle: { codePath: string } | { code: string } } | { workflowsPath: string };

export const WORKFLOWS_PATH = path.resolve(__dirname, '..', 'workflows', 'index.ts');

export async function createKeelWorker(opts: {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  workflows?: WorkflowSource;
  extra?: Partial<WorkerOptions>;
}): Promise<Worker> {
  return Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    ...(opts.workflows ?? { workflowsPath: WORKFLOWS_PATH }),
    activities: createActivities(opts.deps),
    // Cancellation reaches an activity only with a heartbeat's answer: send them often enough that an
    // interrupting message stops a streaming model call within about a second.
    maxHeartbeatThrottleInterval: '1 second',
    ...opts.extra,
  });
}

const noop = () => undefined;
/** The bundler's progress lines are noise for Keel's callers; its errors are not. */
const bundlerLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: (m: string) => console.error(m), log: noop };

/** Keel's workflow code as one bundle (the sources by default), for workers and replayers that take a bundle. */
export async function bundleWorkflows(opts: { workflowsPath?: string; workflowInterceptorModules?: string[] } = {}): Promise<string> {
  const { code } = await bundleWorkflowCode({ workflowsPath: opts.workflowsPath ?? WORKFLOWS_PATH, workflowInterceptorModules: opts.workflowInterceptorModules, logger: bundlerLogger });
  return code;
}
