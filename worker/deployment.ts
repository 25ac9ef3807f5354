import { status } from '@grpc/grpc-js';
import type { WorkflowService } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { WorkerDeployment } from '../domain/config';
import { temporalStatus } from '../services/temporal-status';

/** A client connection or the worker's native one: both reach Temporal's workflow service. */
type Connection = { workflowService: WorkflowService };

/** The build that new workflows start on, and the one that had that place before. */
export interface Promotion {
  current: string;
  previous: string | null;
}

/**
 * Makes a build of Keel's workers the deployment's current version: workflows started from now on run on it, while
 * those pinned to an earlier build finish there (docs/deploy.md). Temporal knows a version only once one of its
 * workers has polled, and refuses to promote one that does not poll Keel's task queue: until then this waits, for
 * at most `timeoutMs`, then says which of the two is missing.
 */
export async function promoteBuild(
  connection: Connection,
  o: { namespace: string; taskQueue: string; deployment: WorkerDeployment; timeoutMs?: number },
): Promise<Promotion> {
  const { namespace, taskQueue, deployment } = o;
  const version = { deploymentName: deployment.name, buildId: deployment.buildId };
  const deadline = Date.now() + (o.timeoutMs ?? 60_000);
  for (;;) {
    const missing = await missingFromVersion(connection, namespace, taskQueue, version);
    if (!missing) break;
    if (Date.now() > deadline) {
      throw new Error(`build ${deployment.buildId} of deployment ${deployment.name} cannot be promoted: ${missing}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  const res = await connection.workflowService.setWorkerDeploymentCurrentVersion({
    namespace,
    deploymentName: deployment.name,
    buildId: deployment.buildId,
    identity: 'keel promote',
  });
  return { current: deployment.buildId, previous: res.previousDeploymentVersion?.buildId || null };
}

/** The task queues (name and type) a version's workers poll; undefined while none of them has polled. */
async function taskQueuesOf(
  connection: Connection,
  namespace: string,
  deploymentVersion: { deploymentName: string; buildId: string },
): Promise<string[] | undefined> {
  try {
    const { workerDeploymentVersionInfo: info } = await connection.workflowService.describeWorkerDeploymentVersion({
      namespace,
      deploymentVersion,
    });
    const { TaskQueueType } = temporal.api.enums.v1;
    return (info?.taskQueueInfos ?? []).map((q) => `${q.name} (${TaskQueueType[q.type ?? 0] ?? q.type})`);
  } catch (err) {
    if (temporalStatus(err)?.code === status.NOT_FOUND) return undefined;
    throw err;
  }
}

/**
 * Why the version cannot be promoted yet, or '' when it can: Temporal refuses a new current version that does not
 * poll every task queue (of every type) the current one polls, and the new one registers each type as it first polls.
 */
async function missingFromVersion(
  connection: Connection,
  namespace: string,
  taskQueue: string,
  deploymentVersion: { deploymentName: string; buildId: string },
): Promise<string> {
  const ours = await taskQueuesOf(connection, namespace, deploymentVersion);
  if (!ours) return 'no worker of it has polled yet';
  const current = await currentBuild(connection, namespace, deploymentVersion.deploymentName);
  const needed =
    current && current !== deploymentVersion.buildId
      ? ((await taskQueuesOf(connection, namespace, { ...deploymentVersion, buildId: current })) ?? [])
      : [`${taskQueue} (TASK_QUEUE_TYPE_WORKFLOW)`];
  const missing = needed.filter((q) => !ours.includes(q));
  return missing.length ? `its workers do not poll ${missing.join(', ')} yet` : '';
}

/**
 * The first build of a deployment (one with no current version yet) makes itself current once it polls, so that a
 * versioned worker started alone serves work; any later build waits for `npm run promote`. Workers of the first
 * build racing to do so all get it. Answers the build that is current afterwards.
 */
export async function promoteIfFirst(
  connection: Connection,
  o: { namespace: string; taskQueue: string; deployment: WorkerDeployment },
): Promise<string | null> {
  const current = await currentBuild(connection, o.namespace, o.deployment.name);
  if (current) return current;
  try {
    return (await promoteBuild(connection, o)).current;
  } catch (err) {
    // Another worker of this build got there first.
    const now = await currentBuild(connection, o.namespace, o.deployment.name);
    if (now === o.deployment.buildId) return now;
    throw err;
  }
}

async function currentBuild(connection: Connection, namespace: string, deploymentName: string) {
  try {
    const { workerDeploymentInfo } = await connection.workflowService.describeWorkerDeployment({
      namespace,
      deploymentName,
    });
    return workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId || null;
  } catch (err) {
    if (temporalStatus(err)?.code === status.NOT_FOUND) return null;
    throw err;
  }
}
