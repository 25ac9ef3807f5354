import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../db/migrate';
import { startDevServer } from '../../scripts/dev-server';
import { startPostgresOnFreePort } from '../../scripts/postgres-process';
import { bundleWorkflows } from '../../worker/bundle';
import { freePort } from '../../scripts/ports';
import { ensureConsoleBuilt } from '../../scripts/console-build';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    databaseUrl: string;
    workflowBundlePath: string;
    workDir: string;
  }
}

/**
 * Real parts for the whole run: a Temporal dev server (the CLI the provisioning script finds or builds), an
 * embedded PostgreSQL in a process of its own, migrations, the workflow bundle built once, and the console built.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'keel-test-'));
  // mkdtemp makes the folder private; as root, PostgreSQL runs as the postgres user, who must reach its data folder.
  await chmod(workDir, 0o755);
  const stops: (() => Promise<void>)[] = [];
  const teardown = async () => {
    await Promise.all(stops.map((stop) => stop().catch(() => undefined)));
    await rm(workDir, { recursive: true, force: true });
  };
  try {
    // Both start at once, and both are waited for: if one fails, the other is stopped, not left running.
    const [temporal, pg] = await Promise.allSettled([
      freePort().then((port) => startDevServer({ port, stdio: 'ignore' })),
      startPostgresOnFreePort(path.join(workDir, 'pg')),
    ]);
    for (const started of [temporal, pg]) if (started.status === 'fulfilled') stops.push(() => started.value.stop());
    if (pg.status === 'rejected') throw pg.reason;
    if (temporal.status === 'rejected') throw temporal.reason;
    await migrate(pg.value.url);
    // The operator console's files, which the API serves at /console (test/console.test.ts opens them).
    await ensureConsoleBuilt();
    const code = await bundleWorkflows();
    const workflowBundlePath = path.join(workDir, 'workflow-bundle.js');
    await writeFile(workflowBundlePath, code);

    project.provide('temporalAddress', temporal.value.address);
    project.provide('databaseUrl', pg.value.url);
    project.provide('workflowBundlePath', workflowBundlePath);
    project.provide('workDir', workDir);
  } catch (err) {
    await teardown();
    // One line, not a stack: the reason (e.g. the embedded PostgreSQL's) already says what to do.
    const line = `keel test setup failed: ${err instanceof Error ? err.message : String(err)}`;
    throw Object.assign(new Error(line), { stack: line });
  }
  return teardown;
}
