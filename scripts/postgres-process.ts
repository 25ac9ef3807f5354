import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { PORT_TAKEN } from '../db/embedded-postgres';
import { freePort } from './ports';
import { spawnTs, stopProcess } from './processes';

export interface PostgresProcess {
  url: string;
  /** Where the cluster's data is (see `movedFrom`). */
  dataDir: string;
  /** The data folder asked for, when the postgres user (root runs PostgreSQL as it) cannot enter it. */
  movedFrom?: string;
  /** The folder of the PostgreSQL binaries it runs. */
  binDir: string;
  process: ChildProcess;
  stop(): Promise<void>;
  /**
   * PostgreSQL's immediate shutdown, as a crash stops it: every backend exits where it stands, and none finishes its
   * statement or hands its locks on first (a fast shutdown terminates backends one by one, so a lock's waiter can be
   * granted the lock and commit before its own turn). The next start recovers from the log.
   */
  crash(): Promise<void>;
}

const FAILED = /^keel postgres failed: (.*)$/;

/**
 * Starts scripts/postgres.ts as a child process and resolves once it is ready. If it fails, the error is the child's
 * one-line reason (scripts/postgres.ts), and the child has exited.
 */
export async function startPostgresProcess(opts: {
  dataDir: string;
  port: number;
  env?: NodeJS.ProcessEnv;
}): Promise<PostgresProcess> {
  const env = { ...process.env, ...opts.env, KEEL_PG_DATA_DIR: opts.dataDir, KEEL_EMBEDDED_PG_PORT: String(opts.port) };
  const child = spawnTs('scripts/postgres.ts', env, ['ignore', 'pipe', 'pipe']);
  let failure: string | undefined;
  // The failure line becomes the error; everything else on its stderr (KEEL_PG_VERBOSE's log) passes through.
  createInterface({ input: child.stderr! }).on('line', (line) => {
    const m = FAILED.exec(line);
    if (m) failure = m[1];
    else process.stderr.write(`${line}\n`);
  });
  const info = new Map<string, string>();
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^(data|moved-from|binaries|ready) (.+)$/.exec(line);
      if (m?.[1] && m[2]) info.set(m[1], m[2]);
      if (m?.[1] === 'ready') resolve();
    });
    // 'close', not 'exit': by then its stderr has been read to the end, failure line included.
    child.once('close', (code) => {
      reject(new Error(failure ?? `embedded PostgreSQL exited before it was ready (code ${code})`));
    });
  });
  const movedFrom = info.get('moved-from');
  return {
    url: info.get('ready') ?? '',
    dataDir: info.get('data') ?? opts.dataDir,
    ...(movedFrom ? { movedFrom } : {}),
    binDir: info.get('binaries') ?? '',
    process: child,
    stop: () => stopProcess(child, 20_000),
    crash: () => crashPostgres(info.get('data') ?? opts.dataDir, child),
  };
}

async function crashPostgres(dataDir: string, wrapper: ChildProcess): Promise<void> {
  // The postmaster's pid is the first line of its lock file.
  const postmaster = Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  process.kill(postmaster, 'SIGQUIT');
  // Not this process's child, so its exit cannot be awaited: it is looked for, for at most 30 s.
  await new Promise<void>((resolve, reject) => {
    const deadline = Date.now() + 30_000;
    const gone = setInterval(() => {
      try {
        process.kill(postmaster, 0);
        if (Date.now() < deadline) return;
        reject(new Error(`PostgreSQL (pid ${postmaster}) did not exit within 30 s of SIGQUIT`));
      } catch {
        resolve();
      }
      clearInterval(gone);
    }, 20);
  });
  // Its wrapper would wait forever for an exit it has already seen (embedded-postgres's stop()): nothing is left.
  await stopProcess(wrapper, 0);
}

/**
 * For tests and tools that take any port: a free one, and another if it was taken before PostgreSQL bound it (the
 * Temporal dev server, starting beside it, picks free ports of its own meanwhile).
 */
export async function startPostgresOnFreePort(dataDir: string): Promise<PostgresProcess> {
  for (let tries = 1; ; tries++) {
    try {
      return await startPostgresProcess({ dataDir, port: await freePort() });
    } catch (err) {
      if (tries >= 3 || !(err instanceof Error && err.message.startsWith(PORT_TAKEN))) throw err;
    }
  }
}
