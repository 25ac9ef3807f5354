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
