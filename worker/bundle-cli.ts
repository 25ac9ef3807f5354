/**
 * Writes Keel's workflow bundle to the file named by its first argument, with the workflow interceptor modules the
 * others name. The worker runs it as a child process: webpack's
 * memory (about 150 MiB that V8 keeps after bundling) then never belongs to the long-lived worker.
 */
import { writeFile } from 'node:fs/promises';
import { bundleWorkflows } from './bundle';

async function main(): Promise<void> {
  const [out, ...workflowInterceptorModules] = process.argv.slice(2);
  if (!out) throw new Error('usage: bundle-cli <output file> [workflow interceptor module …]');
  await writeFile(out, await bundleWorkflows({ workflowInterceptorModules }));
}

main().catch((err: unknown) => {
  console.error('bundling the workflows failed:', err);
  process.exit(1);
});
