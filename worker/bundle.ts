/**
 * Keel's workflow code, as the worker runs it and as replay checks it against recorded histories. Loads no
 * activity: the API replays histories with it too.
 */
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';

/** Where the worker gets its workflow code: a prebuilt bundle (tests build one per run) or the sources. */
export type WorkflowSource = { workflowBundle: { codePath: string } | { code: string } } | { workflowsPath: string };

export const WORKFLOWS_PATH = path.resolve(__dirname, '..', 'workflows', 'index.ts');

const noop = () => undefined;
/** The bundler's progress lines are noise for Keel's callers; its errors are not. */
const bundlerLogger = {
  trace: noop,
  debug: noop,
  info: noop,
  warn: noop,
  error: (m: string) => console.error(m),
  log: noop,
};

/** Keel's workflow code as one bundle (the sources by default), for workers and replayers that take a bundle. */
export async function bundleWorkflows(
  opts: { workflowsPath?: string; workflowInterceptorModules?: string[] } = {},
): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: opts.workflowsPath ?? WORKFLOWS_PATH,
    workflowInterceptorModules: opts.workflowInterceptorModules,
    logger: bundlerLogger,
  });
  return code;
}
