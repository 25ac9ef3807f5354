import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { REPO_ROOT } from '../scripts/processes';

/** Runs an entry point with a hook that prints, as it exits, every module the process had loaded. */
async function modulesLoadedBy(entry: string): Promise<string[]> {
  const hook = path.join(inject('workDir'), 'list-modules.cjs');
  await writeFile(hook, "process.on('exit', () => process.stdout.write(JSON.stringify(Object.keys(require.cache))));");
  // Without DATABASE_URL the process stops right after its imports: what it loaded is what it would run with.
  const env = { ...process.env, DATABASE_URL: '' };
  const child = spawn(process.execPath, ['--import', 'tsx', '--require', hook, entry], { cwd: REPO_ROOT, env });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise((resolve) => child.once('exit', resolve));
  return JSON.parse(out) as string[];
}

describe('the layers, as the processes load them', () => {
  it('the API process loads no activity or workflow module, and not isolated-vm', async () => {
    const loaded = await modulesLoadedBy('api/main.ts');
    expect(loaded.some((m) => m.endsWith(path.join('api', 'server.ts')))).toBe(true);
    expect(loaded.filter((m) => /[/\\](activities|workflows|isolated-vm)[/\\]/.test(m))).toEqual([]);
  });

  it('the worker process, for comparison, does load them', async () => {
    const loaded = await modulesLoadedBy('worker/main.ts');
    expect(loaded.some((m) => m.includes(`${path.sep}isolated-vm${path.sep}`))).toBe(true);
    expect(loaded.some((m) => m.endsWith(path.join('activities', 'index.ts')))).toBe(true);
  });
});
