import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** v1.5.1 is the last Temporal CLI release that `go install` accepts (later ones use a `replace` directive). */
export const TEMPORAL_CLI_VERSION = '1.5.1';
const MODULE = 'github.com/temporalio/cli/cmd/temporal';

export function temporalCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'keel', 'temporal-cli', `v${TEMPORAL_CLI_VERSION}`);
}

function executable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, name);
    if (dir && executable(candidate)) return candidate;
  }
  return undefined;
}

/** TEMPORAL_CLI_PATH, then `temporal` on PATH, then the per-user cache. */
export function findTemporalCli(): string | undefined {
  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv) {
    if (!executable(fromEnv)) throw new Error(`TEMPORAL_CLI_PATH=${fromEnv} is not an executable file`);
    return fromEnv;
  }
  const cached = path.join(temporalCacheDir(), 'temporal');
  return onPath('temporal') ?? (executable(cached) ? cached : undefined);
}

/**
 * Finds the Temporal CLI or builds it with Go into the cache (a few minutes, once). Without Go it fails with how
 * to install the CLI instead; it never falls back to anything that is not a real Temporal server.
 */
export function ensureTemporalCli(log: (line: string) => void = (l) => console.error(l)): string {
  const found = findTemporalCli();
  if (found) return found;
  const go = onPath('go');
  if (!go) {
    throw new Error(
      [
        'The Temporal CLI was not found (TEMPORAL_CLI_PATH, PATH, or ' +
          temporalCacheDir() +
          ') and Go is not installed to build it.',
        'Install one of:',
        '  - the Temporal CLI: https://docs.temporal.io/cli#install ' +
          '(then put `temporal` on PATH or set TEMPORAL_CLI_PATH)',
        `  - Go ≥ 1.25 (https://go.dev/dl/), and Keel builds the CLI v${TEMPORAL_CLI_VERSION} itself`,
      ].join('\n'),
    );
  }
  const dir = temporalCacheDir();
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
  log(`keel: building the Temporal CLI v${TEMPORAL_CLI_VERSION} with Go into ${dir} (once; takes a few minutes)…`);
  const result = spawnSync(
    go,
    [
      'install',
      '-trimpath',
      `-ldflags=-s -w -X github.com/temporalio/cli/temporalcli.Version=${TEMPORAL_CLI_VERSION}`,
      `${MODULE}@v${TEMPORAL_CLI_VERSION}`,
    ],
    { env: { ...process.env, CGO_ENABLED: '0', GOBIN: dir }, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  const built = path.join(dir, 'temporal');
  if (result.status !== 0 || !executable(built)) {
    throw new Error(
      `go install ${MODULE}@v${TEMPORAL_CLI_VERSION} failed (exit ${result.status ?? result.signal}); ` +
        'see the output above',
    );
  }
  log(`keel: Temporal CLI ready at ${built}`);
  return built;
}
