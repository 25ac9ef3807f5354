/**
 * Workflow tasks that fail, as a worker sees them: the SDK's core logs each failed task with the run's id and the
 * failure, and the worker records it here with the workflow's type and agent, read once from Temporal's visibility.
 * /metrics counts them (keel_workflow_task_failures_total) and the console warns of the agent's runs.
 */
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import type { Pool } from '../db/pool';
import { failingRunsOf, recordWorkflowTaskFailure, type WorkflowTaskFailure } from '../db/workflow-task-failures';
import { workflowTaskFailureCause } from '../domain/failures';
import { SA } from '../domain/search-attributes';
import { pendingTask } from './workflow-state';

/**
 * A run is shown as failing once Temporal is at this attempt of its workflow task: it failed, and failed again when
 * retried (a task lost with a killed worker succeeds on its next attempt).
 */
export const FAILING_FROM_ATTEMPT = 3;

/** The failure's own message, out of core's debug rendering (`Failure { message: "…", … }`). */
export function taskFailureMessage(failure: string): string {
  const m = /message: "((?:[^"\\]|\\.)*)"/.exec(failure);
  return (m ? m[1]!.replace(/\\"/g, '"').replace(/\\n/g, '\n') : failure).slice(0, 2000);
}

type WorkflowService = temporal.api.workflowservice.v1.WorkflowService;

/**
 * Records one failed task of `runId`, when the run belongs to this worker's task queue (a process may run several
 * workers; each records only its own). Unknown to visibility yet: recorded without a type.
 */
export async function noteWorkflowTaskFailure(
  pool: Pool,
  temporalService: WorkflowService,
  where: { namespace: string; taskQueue: string },
  failed: { runId: string; failure: string },
): Promise<void> {
  const { executions } = await temporalService.listWorkflowExecutions({
    namespace: where.namespace,
    query: `RunId = "${failed.runId.replace(/"/g, '')}"`,
    pageSize: 1,
  });
  const run = executions?.[0];
  if (run && run.taskQueue !== where.taskQueue) return;
  const agent = run?.searchAttributes?.indexedFields?.[SA.agentId.name]?.data;
  await recordWorkflowTaskFailure(pool, {
    runId: failed.runId,
    workflowId: run?.execution?.workflowId ?? 'unknown',
    workflowType: run?.type?.name ?? 'unknown',
    agentId: agent ? (JSON.parse(Buffer.from(agent).toString('utf8')) as string) : null,
    cause: workflowTaskFailureCause(failed.failure),
    lastMessage: taskFailureMessage(failed.failure),
  });
}

/** A run whose workflow task keeps failing now: what the workers recorded, and Temporal's attempt count. */
export type FailingRun = WorkflowTaskFailure & { attempt: number };

/**
 * The agent's runs whose workflow task is failing now (at attempt FAILING_FROM_ATTEMPT or later), the latest failure
 * first: the runs the workers recorded a failure of, each asked of Temporal (a run reset or ended is no longer one).
 */
export async function failingRuns(pool: Pool, client: Client, agentId: string): Promise<FailingRun[]> {
  const recorded = await failingRunsOf(pool, agentId);
  const now = await Promise.all(recorded.map((r) => pendingTask(client, r.workflowId)));
  return recorded.flatMap((r, i) => {
    const task = now[i]!;
    return task.kind === 'open' && task.runId === r.runId && task.attempt >= FAILING_FROM_ATTEMPT
      ? [{ ...r, attempt: task.attempt }]
      : [];
  });
}
