import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The Temporal programs Keel builds from source with `go install` into the per-user cache, once, and runs from there:
 * the CLI (its dev server, for `npm start` and the tests) and, for `npm run cluster`, the server, its SQL tool and
 * the Web UI's server. Each has a folder of its own, so two binaries both named `server` never meet.
 */
export interface GoTool {
  /** Words for messages, e.g. "the Temporal CLI v1.5.1". */
  label: string;
  /** The cache folder's name, under ~/.cache/keel. */
  folder: string;
  version: string;
  /** `go install` arguments: package@version, one or more of the same module. */
  packages: string[];
  /** The binary this tool is run as, in its folder. */
  binary: string;
  ldflags?: string;
}

export function executable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, name);
    if (dir && executable(candidate)) return candidate;
  }
  return undefined;
}

export function goToolDir(tool: Pick<GoTool, 'folder' | 'version'>): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'keel', tool.folder, `v${tool.version}`);
}

/** The tool's binary in the cache, if it was built. */
export function cachedGoTool(tool: GoTool): string | undefined {
  const built = path.join(goToolDir(tool), tool.binary);
  return executable(built) ? built : undefined;
}

/**
 * The cached binary, or built now with Go (a few minutes, once). Without Go it fails with what to install; it never
 * falls back to anything that is not the real program.
 */
export function ensureGoTool(tool: GoTool, log: (line: string) => void = (l) => console.error(l)): string {
  const cached = cachedGoTool(tool);
  if (cached) return cached;
  const go = onPath('go');
  if (!go) {
    throw new Error(
      `${tool.label} is not built (${goToolDir(tool)}) and Go is not installed to build it: ` +
        'install Go ≥ 1.25 (https://go.dev/dl/) and run this again',
    );
  }
  const dir = goToolDir(tool);
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
  log(`keel: building ${tool.label} with Go into ${dir} (once; takes a few minutes)…`);
  const result = spawnSync(
    go,
    ['install', '-trimpath', ...(tool.ldflags ? [`-ldflags=${tool.ldflags}`] : []), ...tool.packages],
    { env: { ...process.env, CGO_ENABLED: '0', GOBIN: dir }, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  const built = path.join(dir, tool.binary);
  if (result.status !== 0 || !executable(built)) {
    throw new Error(
      `go install ${tool.packages.join(' ')} failed (exit ${result.status ?? result.signal}); see the output above`,
    );
  }
  log(`keel: ${tool.label} ready at ${built}`);
  return built;
}
