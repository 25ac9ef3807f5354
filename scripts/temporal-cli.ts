import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, watch } from 'node:fs';
import path from 'node:path';
import { ensureGoTool, executable, goToolDir, onPath, type GoTool } from './go-tools';
import { REPO_ROOT } from './processes';

/**
 * The CLI version Keel's tests pass on. The SDK downloads this release; it is also the last one that `go install`
 * accepts (later ones use a `replace` directive).
 */
export const TEMPORAL_CLI_VERSION = '1.5.1';

export const TEMPORAL_CLI: GoTool = {
  label: `the Temporal CLI v${TEMPORAL_CLI_VERSION}`,
  folder: 'temporal-cli',
  version: TEMPORAL_CLI_VERSION,
  packages: [`github.com/temporalio/cli/cmd/temporal@v${TEMPORAL_CLI_VERSION}`],
  binary: 'temporal',
  ldflags: `-s -w -X github.com/temporalio/cli/temporalcli.Version=${TEMPORAL_CLI_VERSION}`,
};

export function temporalCacheDir(): string {
  return goToolDir(TEMPORAL_CLI);
}

/** The CLI Keel runs, and which way it got it: what `npm start`'s banner says. */
export interface TemporalCli {
  path: string;
  how: 'TEMPORAL_CLI_PATH' | 'PATH' | 'cache' | 'downloaded' | 'built';
}

const HOW: Record<TemporalCli['how'], string> = {
  TEMPORAL_CLI_PATH: 'from TEMPORAL_CLI_PATH',
  PATH: 'found on PATH',
  cache: "found in Keel's cache",
  downloaded: `v${TEMPORAL_CLI_VERSION}, downloaded by the Temporal SDK just now`,
  built: `v${TEMPORAL_CLI_VERSION}, built with Go just now`,
};

export const describeTemporalCli = (cli: TemporalCli): string => `${cli.path} (${HOW[cli.how]})`;

/** TEMPORAL_CLI_PATH, then `temporal` on PATH, then the per-user cache. */
export function findTemporalCli(): TemporalCli | undefined {
  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv) {
    if (!executable(fromEnv)) throw new Error(`TEMPORAL_CLI_PATH=${fromEnv} is not an executable file`);
    return { path: fromEnv, how: 'TEMPORAL_CLI_PATH' };
  }
  const onSearchPath = onPath('temporal');
  if (onSearchPath) return { path: onSearchPath, how: 'PATH' };
  const cached = path.join(temporalCacheDir(), TEMPORAL_CLI.binary);
  return executable(cached) ? { path: cached, how: 'cache' } : undefined;
}

/**
 * How long the SDK's download may take. Its HTTP client has no timeout of its own: without an answer from
 * temporal.download within `reachMs` of the first request (without internet access it fails in 15 ms when DNS says
 * so, but a firewall that drops packets would hold it for minutes) Keel moves on to Go; `totalMs` bounds it all.
 */
export interface DownloadLimits {
  reachMs: number;
  totalMs: number;
}
export const DOWNLOAD_LIMITS: DownloadLimits = { reachMs: 20_000, totalMs: 10 * 60_000 };

export interface EnsureOptions {
  log?: (line: string) => void;
  limits?: DownloadLimits;
}

/**
 * Finds the Temporal CLI; else has the Temporal SDK download it into the cache (seconds, with internet access); else
 * builds it with Go into the cache (a few minutes, once). Failing all three it says what each attempt met and how to
 * make one work; it never falls back to anything that is not a real Temporal server.
 */
export async function ensureTemporalCli(options: EnsureOptions = {}): Promise<TemporalCli> {
  const log = options.log ?? ((line: string) => console.error(line));
  const found = findTemporalCli();
  if (found) return found;
  const dir = temporalCacheDir();
  const binary = path.join(dir, TEMPORAL_CLI.binary);
  log(
    `keel: no Temporal CLI (TEMPORAL_CLI_PATH, PATH, ${binary}); downloading v${TEMPORAL_CLI_VERSION} with the ` +
      `Temporal SDK into ${dir}…`,
  );
  const download = await downloadWithSdk(dir, options.limits ?? DOWNLOAD_LIMITS);
  if (download.ok) {
    log(`keel: the Temporal CLI v${TEMPORAL_CLI_VERSION} ready at ${binary}`);
    return { path: binary, how: 'downloaded' };
  }
  let goFailure = 'Go is not installed (`go` is not on PATH)';
  if (onPath('go')) {
    log(`keel: the download failed (${download.reason}); building with Go instead`);
    try {
      return { path: ensureGoTool(TEMPORAL_CLI, log), how: 'built' };
    } catch (err) {
      goFailure = err instanceof Error ? err.message : String(err);
    }
  }
  throw new Error(
    [
      'Keel found no Temporal CLI and could not get one. It tried, in this order:',
      `  1. TEMPORAL_CLI_PATH (not set), \`temporal\` on PATH (none) and Keel's cache (no ${binary})`,
      `  2. the Temporal SDK's download of v${TEMPORAL_CLI_VERSION}: ${download.reason}`,
      `  3. a build with Go: ${goFailure}`,
      'Any one of these makes it work:',
      '  - internet access to temporal.download (HTTPS_PROXY is honoured): the SDK downloads the CLI in seconds',
      '  - the Temporal CLI (https://docs.temporal.io/cli#install), with `temporal` on PATH or TEMPORAL_CLI_PATH set',
      `  - Go ≥ 1.25 (https://go.dev/dl/): Keel builds the CLI v${TEMPORAL_CLI_VERSION} itself (a few minutes, once)`,
    ].join('\n'),
  );
}

const SDK_DOWNLOAD = '--sdk-download';

/**
 * `@temporalio/testing`'s cached download of the dev server, into `dir`. The SDK downloads only on the way to starting
 * a server, so a child process starts one and stops it: a process of its own, in a group of its own, so that a
 * download past its limits is killed with whatever it started, and the SDK's runtime never enters Keel's processes.
 */
function downloadWithSdk(dir: string, limits: DownloadLimits): Promise<{ ok: true } | { ok: false; reason: string }> {
  mkdirSync(dir, { recursive: true });
  // sdk-core's ephemeral_server names the file after the version asked for; Keel's cache keeps it as `temporal`.
  const downloadName = `temporal-v${TEMPORAL_CLI_VERSION}`;
  const downloaded = path.join(dir, downloadName);
  const child = spawn(process.execPath, ['--import', 'tsx', __filename, SDK_DOWNLOAD, dir], {
    cwd: REPO_ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-4_000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.once('error', (err) => (output += `\n${err.message}`));
  let stopped: string | undefined;
  const kill = () => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  const stop = (reason: string) => {
    stopped = reason;
    kill();
  };
  // Ctrl-C reaches npm start's process group, not this child's.
  process.once('exit', kill);
  // Counted from the SDK's first request, not from the child's start (seconds on a busy machine).
  let reach: NodeJS.Timeout | undefined;
  let writing = false;
  child.once('message', () => {
    if (writing) return;
    reach = setTimeout(() => {
      // A watch event can be missed: a download already writing is not cut off.
      if (!existsSync(`${downloaded}.downloading`))
        stop(`temporal.download did not answer within ${limits.reachMs / 1000} s`);
    }, limits.reachMs);
  });
  const total = setTimeout(() => stop(`the download did not finish within ${limits.totalMs / 1000} s`), limits.totalMs);
  // The SDK writes the binary to `<name>.downloading` once temporal.download has said where the archive is.
  const watcher = watch(dir, (_event, name) => {
    if (name !== `${downloadName}.downloading`) return;
    writing = true;
    clearTimeout(reach);
  });
  watcher.on('error', () => undefined); // the folder gone: the exit below still says how it ended
  return new Promise((resolve) => {
    child.once('close', (code, signal) => {
      clearTimeout(reach);
      clearTimeout(total);
      watcher.close();
      process.off('exit', kill);
      // A server that then failed to start does not matter: the binary is what was wanted.
      if (executable(downloaded)) {
        const binary = path.join(dir, TEMPORAL_CLI.binary);
        try {
          renameSync(downloaded, binary);
        } catch (err) {
          // Unless another process's download got there first.
          if (!executable(binary))
            return resolve({ ok: false, reason: `could not move it to ${binary}: ${String(err)}` });
        }
        return resolve({ ok: true });
      }
      // What a killed download left: the SDK would otherwise wait a minute for it to finish.
      if (stopped) rmSync(`${downloaded}.downloading`, { force: true });
      const lastLine = output.trim().split('\n').pop() || undefined;
      resolve({ ok: false, reason: stopped ?? sdkError(lastLine) ?? `it exited (${code ?? signal}) without a binary` });
    });
  });
}

/** The SDK's message without its wrapping, and without reqwest naming the same URL twice. */
const sdkError = (line: string | undefined): string | undefined =>
  line
    ?.replace(/^Failed to start ephemeral server: failed to download ephemeral server executable: /, '')
    .replace(/(error sending request for url \([^)]*\)): \1/, '$1');

async function downloadInThisProcess(dir: string): Promise<void> {
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  process.send?.('asking temporal.download');
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'cached-download', downloadDir: dir, version: `v${TEMPORAL_CLI_VERSION}` },
      log: { format: 'pretty', level: 'error' },
    },
  });
  await env.teardown();
}

if (require.main === module && process.argv[2] === SDK_DOWNLOAD) {
  downloadInThisProcess(process.argv[3] ?? '').then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err instanceof Error ? err.message : String(err));
      process.exit(1);
    },
  );
}
