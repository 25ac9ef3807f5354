/**
 * Keel's workflow code, as the worker runs it and as replay checks it against recorded histories. Loads no
 * activity: scripts replay histories with it too.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { bundleWorkflowCode } from '@temporalio/worker';

export type { WorkflowSource } from '../services/replay';

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

/**
 * Keel's workflow code (with these workflow interceptors, such as tracing's), bundled by a child process
 * (worker/bundle-cli.ts, with this process's loader flags): the bundler's memory goes with the child.
 */
export async function bundleInChildProcess(workflowInterceptorModules: string[] = []): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'keel-bundle-'));
  try {
    const out = path.join(dir, 'workflows.js');
    const cli = path.resolve(__dirname, 'bundle-cli.ts');
    await promisify(execFile)(process.execPath, [...process.execArgv, cli, out, ...workflowInterceptorModules]);
    return await readFile(out, 'utf8');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

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
