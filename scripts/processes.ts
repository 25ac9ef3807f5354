import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..');

/** Runs one of Keel's TypeScript entry points (worker/main.ts, api/main.ts) as its own Node process. */
export function spawnTs(
  entry: string,
  env: NodeJS.ProcessEnv,
  stdio: StdioOptions = 'inherit',
  args: string[] = [],
): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, entry), ...args], {
    cwd: REPO_ROOT,
    env,
    stdio,
  });
}

/**
 * A Keel worker's process. glibc gives every thread that allocates an arena of its own, and the worker's native
 * threads (the SDK's core, libuv's pool) keep in them what finished workflows gave back: with two arenas the worker
 * held 682 MiB after 1,000 conversations instead of 808 (bench/REPORT.md). A MALLOC_ARENA_MAX in `env` wins.
 */
export function spawnWorker(env: NodeJS.ProcessEnv, stdio: StdioOptions = 'inherit'): ChildProcess {
  return spawnTs('worker/main.ts', { MALLOC_ARENA_MAX: WORKER_MALLOC_ARENAS, ...env }, stdio);
}
export const WORKER_MALLOC_ARENAS = '2';

/** Sends SIGTERM and waits for the exit; SIGKILL after `graceMs`. */
export function stopProcess(child: ChildProcess, graceMs = 10_000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
