import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../db/migrate';
import { startDevServer } from '../../scripts/dev-server';
import { startPostgresProcess } from '../../scripts/postgres-process';
import { bundleWorkflows } from '../../worker/worker';
import { freePort } from '../../scripts/ports';

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
 * embedded PostgreSQL in a process of its own, migrations, and the workflow bundle built once.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'keel-test-'));
  // mkdtemp makes the folder private; as root, PostgreSQL runs as the postgres user, who must reach its data folder.
  await chmod(workDir, 0o755);
  const [temporal, pg] = await Promise.all([
    freePort().then((port) => startDevServer({ port, stdio: 'ignore' })),
    freePort().then((port) => startPostgresProcess({ dataDir: path.join(workDir, 'pg'), port })),
  ]);
  await migrate(pg.url);
  const code = await bundleWorkflows();
  const workflowBundlePath = path.join(workDir, 'workflow-bundle.js');
  await writeFile(workflowBundlePath, code);

  project.provide('temporalAddress', temporal.address);
  project.provide('databaseUrl', pg.url);
  project.provide('workflowBundlePath', workflowBundlePath);
  project.provide('workDir', workDir);

  return async () => {
    await Promise.all([temporal.stop(), pg.stop()]);
    await rm(workDir, { recursive: true, force: true });
  };
}

