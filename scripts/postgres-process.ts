import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { spawnTs, stopProcess } from './processes';

export interface PostgresProcess {
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** Starts scripts/postgres.ts as a child process and resolves with its URL once it is ready. */
export async function startPostgresProcess(opts: { dataDir: string; port: number; env?: NodeJS.ProcessEnv }): Promise<PostgresProcess> {
  const child = spawnTs('scripts/postgres.ts', { ...process.env, ...opts.env, KEEL_PG_DATA_DIR: opts.dataDir, KEEL_EMBEDDED_PG_PORT: String(opts.port) }, [
    'ignore',
    'pipe',
    'inherit',
  ]);
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const m = /^ready (\S+)$/.exec(line);
      if (m?.[1]) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`embedded PostgreSQL exited before it was ready (code ${code})`)));
  });
  return { url, process: child, stop: () => stopProcess(child, 20_000) };
}
