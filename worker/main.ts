import { NativeConnection, Runtime } from '@temporalio/worker';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { loadConfig } from '../domain/config';
import { jobSettings } from '../services/job-settings';
import { ensureSearchAttributes, MissingSearchAttributesError } from '../services/temporal-namespace';
import { bundleInChildProcess, type WorkflowSource } from './bundle';
import { FORWARD_CORE_LOGS, tapFailedWorkflowTasks, workerLogger } from './logger';
import { logOutput } from '../services/log-output';
import { tracingFromConfig } from './tracing';
import {
  defaultModelName,
  egressFromConfig,
  providerFromConfig,
  toolSessionPool,
  transportsFromConfig,
} from './wiring';
import { payloadEncryption } from '../services/payload-encryption';
import { secretBoxOf } from '../services/secrets';
import { promoteIfFirst } from './deployment';
import { createKeelWorker } from './worker';
import { temporalConnectionOptions } from '../services/temporal-connection';

/**
 * The Temporal Worker process: every workflow and activity of Keel on one task queue. SIGINT and SIGTERM make the
 * Worker stop polling and finish what it holds before the process exits (the SDK's shutdown signals).
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  if (!config.databaseUrl)
    throw new Error('DATABASE_URL is not set: run `npm start`, or point DATABASE_URL at PostgreSQL');
  // Before anything starts: production without payload keys refuses here, saying why.
  const payloads = payloadEncryption(config.payloads, 'worker');
  Runtime.install({
    // Core's logs come to the worker's own log, and a failed workflow task is recorded (worker/worker.ts).
    logger: tapFailedWorkflowTasks(workerLogger(config.logLevel, logOutput())),
    shutdownSignals: ['SIGINT', 'SIGTERM'],
    telemetryOptions: {
      logging: FORWARD_CORE_LOGS,
      ...(config.workerMetricsAddress ? { metrics: { prometheus: { bindAddress: config.workerMetricsAddress } } } : {}),
    },
  });
  await migrate(config.databaseUrl);
  const connection = await NativeConnection.connect(temporalConnectionOptions(config.temporal));
  // Without Keel's search attributes Temporal refuses every workflow Keel starts: register them, or stop here.
  const { namespace } = config.temporal;
  const added = await ensureSearchAttributes(connection, namespace);
  if (added.length) {
    console.log(`keel worker: registered the search attributes ${added.join(', ')} in namespace ${namespace}`);
  }
  const pool = createPool(config.databaseUrl);
  const tracing = tracingFromConfig(config, 'keel-worker');
  const bundle = config.workflowBundle;
  const workflows: WorkflowSource = {
    workflowBundle: bundle ? { codePath: bundle } : { code: await bundleInChildProcess(tracing?.workflowModules) },
  };
  const egress = egressFromConfig(config);
  const toolSessions = toolSessionPool();
  try {
    const worker = await createKeelWorker({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      deps: {
        pool,
        provider: providerFromConfig(config, pool, egress),
        defaultModel: defaultModelName(config),
        transports: transportsFromConfig(config, egress),
        egress,
        jobs: jobSettings(config),
        routines: config.routines,
        reflection: config.reflection,
        conversationIdleMs: config.conversationIdleMs,
        prices: config.prices,
        rateLimits: config.rateLimits,
        secrets: secretBoxOf(config.secretsKey),
        toolSessions,
        toolApprovalWaitMs: config.tools.approvalWaitMs,
      },
      workflows,
      dataConverter: payloads.dataConverter,
      capacity: config.worker,
      ...(config.deployment ? { deployment: config.deployment } : {}),
      extra: tracing ? { plugins: [tracing.plugin] } : undefined,
    });
    const version = config.deployment
      ? `deployment ${config.deployment.name} build ${config.deployment.buildId}`
      : 'unversioned';
    console.log(
      `keel worker: task queue ${config.temporal.taskQueue} on ${config.temporal.address} (${version}), ` +
        `model ${config.model.provider}, egress: ${egress.describe()}, payloads: ${payloads.describe}`,
    );
    const running = worker.run();
    if (config.deployment) {
      const o = { namespace, taskQueue: config.temporal.taskQueue, deployment: config.deployment };
      const current = await promoteIfFirst(connection, o).catch((err: unknown) => {
        console.error(`keel worker: could not check the deployment's current build: ${String(err)}`);
        return null;
      });
      if (current && current !== config.deployment.buildId) {
        console.log(
          `keel worker: build ${current} is current; this build takes new work after \`npm run promote -- ` +
            `${config.deployment.buildId}\``,
        );
      }
    }
    await running;
  } finally {
    await connection.close();
    await pool.end();
    await tracing?.shutdown();
    await toolSessions.closeAll();
    await egress.close();
  }
}

main().catch((err: unknown) => {
  // A refusal Keel explains (e.g. the missing search attributes) is printed as its message alone.
  console.error('keel worker failed:', err instanceof MissingSearchAttributesError ? err.message : err);
  process.exit(1);
});
