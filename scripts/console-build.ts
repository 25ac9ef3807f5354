import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { REPO_ROOT } from './processes';

const CONSOLE_DIR = path.join(REPO_ROOT, 'console');
/** The build's output, which api/console.ts serves. */
const CONSOLE_DIST = path.join(CONSOLE_DIR, 'dist');

/** The newest modification time of any file under `dir`, leaving out the build's output. */
async function newestSource(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (full === CONSOLE_DIST || entry.name === 'node_modules') continue;
    const mtime = entry.isDirectory() ? await newestSource(full) : (await stat(full)).mtimeMs;
    newest = Math.max(newest, mtime);
  }
  return newest;
}

/** Builds the console with Vite (console/vite.config.mts), as `npm run build:console` does. */
export async function buildConsole(): Promise<void> {
  // Loaded only to build: Vite is a development dependency, and most starts find the console already built.
  const { build } = await import('vite');
  await build({ configFile: path.join(CONSOLE_DIR, 'vite.config.mts'), logLevel: 'warn' });
}

/**
 * The console's built files, built first when console/dist/index.html is missing or older than any file under
 * console/ outside dist. Resolves to the dist folder.
 */
export async function ensureConsoleBuilt(): Promise<string> {
  const built = await stat(path.join(CONSOLE_DIST, 'index.html')).then(
    (s) => s.mtimeMs,
    () => undefined,
  );
  if (built === undefined || built < (await newestSource(CONSOLE_DIR))) await buildConsole();
  return CONSOLE_DIST;
}
