import { Connection } from '@temporalio/client';
import { loadConfig } from '../domain/config';
import { temporalConnectionOptions } from '../services/temporal-connection';
import { promoteBuild } from '../worker/deployment';

/**
 * `npm run promote -- <build-id>`: the last step of a deploy (docs/deploy.md). Once the new build's workers poll, it
 * becomes the current version of KEEL_DEPLOYMENT_NAME: new workflows start on it, and those pinned to the previous
 * build finish on that build's workers, which are stopped once it is drained.
 */
async function main(): Promise<void> {
  const buildId = process.argv[2];
  if (!buildId || process.argv.length > 3) throw new Error('usage: npm run promote -- <build-id>');
  const config = loadConfig({ ...process.env, KEEL_BUILD_ID: buildId });
  const deployment = config.deployment!;
  const connection = await Connection.connect(temporalConnectionOptions(config.temporal));
  try {
    const { previous } = await promoteBuild(connection, {
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      deployment,
    });
    if (previous === buildId) {
      console.log(`build ${buildId} was already the current version of deployment ${deployment.name}`);
      return;
    }
    console.log(`build ${buildId} is the current version of deployment ${deployment.name}`);
    if (previous) {
      console.log(
        `build ${previous} finishes what is pinned to it; stop its workers once it shows DRAINED:\n` +
          `  temporal worker deployment describe-version --deployment-name ${deployment.name} --build-id ${previous}`,
      );
    }
  } finally {
    await connection.close();
  }
}

main().catch((err: unknown) => {
  console.error('keel promote:', err instanceof Error ? err.message : err);
  process.exit(1);
});
