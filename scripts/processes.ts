import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { writeSync } from 'node:fs';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..');

/** Runs one of Keel's TypeScript entry points (worker/main.ts, api/main.ts) as its own Node process. */
export function spawnTs(
  entry: string,
  env: NodeJS.ProcessEnv,
  stdio: StdioOptions = 'inherit',
  args: string[] = [],
  nodeFlags: string[] = [],
): ChildProcess {
  return spawn(process.execPath, [...nodeFlags, '--import', 'tsx', path.join(REPO_ROOT, entry), ...args], {
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
  return spawnTs('worker/main.ts', { MALLOC_ARENA_MAX: WORKER_MALLOC_ARENAS, ...env }, stdio, [], WORKER_NODE_FLAGS);
}
export const WORKER_MALLOC_ARENAS = '2';
/** A worker's own Node flags, as package.json's `worker` script gives them too: see worker/workflow-thread.cjs. */
export const WORKER_NODE_FLAGS = ['--require', path.join(REPO_ROOT, 'worker', 'workflow-thread.cjs')];

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

/** A server's output as it goes where it was sent, with its last lines kept so that a failed start can say why. */
export interface OutputTail {
  /** The last lines it wrote, stdout and stderr interleaved. */
  lines(): string[];
}

/**
 * Starts `command` with its stdout and stderr piped, passes both on to where `stdio` names (a file descriptor, this
 * process's own streams, or nowhere), and keeps the last `keep` lines.
 */
export function spawnKeepingTail(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; stdio: StdioOptions },
  keep = 30,
): { child: ChildProcess; tail: OutputTail } {
  const child = spawn(command, args, { env: options.env, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const kept: string[] = [];
  let partial = '';
  const target = (i: 1 | 2): ((chunk: Buffer) => void) => {
    const to = Array.isArray(options.stdio) ? options.stdio[i] : options.stdio;
    if (typeof to === 'number') return (chunk) => writeSync(to, chunk);
    if (to === 'inherit') return (chunk) => (i === 1 ? process.stdout : process.stderr).write(chunk);
    return () => undefined;
  };
  for (const i of [1, 2] as const) {
    const pass = target(i);
    const stream = i === 1 ? child.stdout : child.stderr;
    stream?.on('data', (chunk: Buffer) => {
      pass(chunk);
      const text = partial + chunk.toString('utf8');
      const lines = text.split('\n');
      partial = lines.pop() ?? '';
      kept.push(...lines.filter((l) => l.trim()));
      kept.splice(0, Math.max(0, kept.length - keep));
    });
  }
  return { child, tail: { lines: () => [...kept, ...(partial.trim() ? [partial] : [])] } };
}

/** "… exited early (code 1); its last lines:" and those lines, indented: what a failed start reports. */
export function exitedEarly(what: string, code: number | null, signal: NodeJS.Signals | null, tail: OutputTail): Error {
  const lines = tail.lines();
  const how = signal ? `signal ${signal}` : `code ${code}`;
  return new Error(
    `${what} exited early (${how})` +
      (lines.length ? `; its last lines:\n${lines.map((l) => `  ${l}`).join('\n')}` : '; it wrote nothing'),
  );
}
