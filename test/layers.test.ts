import { spawn } from 'node:child_process';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { REPO_ROOT } from '../scripts/processes';
import { staticImportGraph } from './support/static-imports';

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

describe('activities/, as the worker registers it', () => {
  it('exports activity factories only: each value of a file of activities/ is a function …Activities', async () => {
    const dir = path.join(REPO_ROOT, 'activities');
    const files = (await readdir(dir)).filter((f) => f.endsWith('.ts'));
    const exported: string[] = [];
    for (const f of files) {
      const mod = (await import(path.join(dir, f))) as Record<string, unknown>;
      for (const [name, value] of Object.entries(mod)) exported.push(`${f}:${name}:${typeof value}`);
    }
    expect(exported.filter((e) => !/:[a-z][A-Za-z]*Activities:function$/.test(e))).toEqual([]);
    expect(exported).toContain('index.ts:createActivities:function');
  });
});

describe('the workflow bundle, as the worker loads it', () => {
  it('holds no MCP client or schema: tool servers are reached by activities only (issue 26)', async () => {
    const bundle = await readFile(inject('workflowBundlePath'), 'utf8');
    // The bundle is the workflows' own code: it names the tool-call steps it schedules…
    expect(bundle).toContain('prepareToolCall');
    // …and nothing of the SDK that talks to servers.
    expect(bundle).not.toContain('@modelcontextprotocol');
    expect(bundle).not.toContain('StreamableHTTPClientTransport');
    expect(bundle).not.toContain('openToolServer');
  });

  it('builds no schema or rule table: what a workflow loads imports no zod, croner or JSON table (issue 27)', () => {
    // The SDK evaluates these modules once per cached workflow: each must be cheap to load.
    const { files, packages } = staticImportGraph(REPO_ROOT, 'workflows/index.ts');
    expect(packages).toEqual(['@temporalio/common', '@temporalio/workflow', 'async-mutex']);
    expect(files.filter((f) => !/^(workflows|contracts|domain)\/[a-z-]+\.ts$/.test(f))).toEqual([]);
    expect(files).not.toContain('domain/tools.ts');
    expect(files).not.toContain('domain/reply-guard.ts');
    // The older histories' checks are in the bundle, loaded on first use only.
    expect(files).toContain('workflows/older-checks.ts');
    expect(files).not.toContain('workflows/history-checks.ts');
  });
});
