import path from 'node:path';
import { ensureGoTool, executable, goToolDir, onPath, type GoTool } from './go-tools';

/** v1.5.1 is the last Temporal CLI release that `go install` accepts (later ones use a `replace` directive). */
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

/** TEMPORAL_CLI_PATH, then `temporal` on PATH, then the per-user cache. */
export function findTemporalCli(): string | undefined {
  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv) {
    if (!executable(fromEnv)) throw new Error(`TEMPORAL_CLI_PATH=${fromEnv} is not an executable file`);
    return fromEnv;
  }
  const cached = path.join(temporalCacheDir(), TEMPORAL_CLI.binary);
  return onPath('temporal') ?? (executable(cached) ? cached : undefined);
}

/**
 * Finds the Temporal CLI or builds it with Go into the cache (a few minutes, once). Without Go it fails with how
 * to install the CLI instead; it never falls back to anything that is not a real Temporal server.
 */
export function ensureTemporalCli(log: (line: string) => void = (l) => console.error(l)): string {
  const found = findTemporalCli();
  if (found) return found;
  if (!onPath('go')) {
    throw new Error(
      [
        `The Temporal CLI was not found (TEMPORAL_CLI_PATH, PATH, or ${temporalCacheDir()}) and Go is not installed ` +
          'to build it.',
        'Install one of:',
        '  - the Temporal CLI: https://docs.temporal.io/cli#install ' +
          '(then put `temporal` on PATH or set TEMPORAL_CLI_PATH)',
        `  - Go ≥ 1.25 (https://go.dev/dl/), and Keel builds the CLI v${TEMPORAL_CLI_VERSION} itself`,
      ].join('\n'),
    );
  }
  return ensureGoTool(TEMPORAL_CLI, log);
}
