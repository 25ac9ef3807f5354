import { WorkflowNotFoundError, type Client, type WorkflowExecutionStatusName } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { workflowTaskFailureCause, type WorkflowTaskFailureCause } from '../domain/failures';

/**
 * Whether a workflow is open, or how it closed; NOT_FOUND when Temporal does not know it (it never started, or it
 * closed longer ago than the namespace's retention).
 */
export type WorkflowState =
  { open: true } | { open: false; status: Exclude<WorkflowExecutionStatusName, 'RUNNING'> | 'NOT_FOUND' };

/**
 * The state of the latest run of a workflow id. Only Temporal's own answer is a verdict: when Temporal cannot be
 * reached this throws, so that the caller (an activity, retried) never takes a running workflow for a closed one and
 * abandons its work.
 */
export async function workflowState(
  client: Client,
  workflowId: string,
  firstExecutionRunId?: string,
): Promise<WorkflowState> {
  try {
    const options = firstExecutionRunId ? { firstExecutionRunId } : undefined;
    const handle = client.workflow.getHandle(workflowId, undefined, options);
    const { status } = await handle.describe();
    // describe() reads the latest run, so a run that continued as new is never the one answering.
    return status.name === 'RUNNING' ? { open: true } : { open: false, status: status.name };
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { open: false, status: 'NOT_FOUND' };
    throw err;
  }
}

/** True while the workflow runs; false once it closed or when Temporal does not know it; throws when unreachable. */
export async function workflowIsOpen(
  client: Client,
  workflowId: string,
  firstExecutionRunId?: string,
): Promise<boolean> {
  return (await workflowState(client, workflowId, firstExecutionRunId)).open;
}

/** A workflow task's attempts that timed out (a worker lost mid-task) record no failure. */
export const NO_FAILURE_RECORDED = 'no failure recorded';

/** Where a workflow stands when something waited on it too long: what a booking or a notice says of it. */
export type WorkflowProgress =
  | { kind: 'failing'; cause: WorkflowTaskFailureCause; attempt: number; runId: string; message: string }
  | { kind: 'running'; runId: string }
  | { kind: 'closed'; status: string };

/**
 * The latest run of a workflow id: closed, running, or running with a workflow task that keeps failing (its attempt
 * count, and the cause and message of the last failure its history records).
 */
export async function workflowProgress(client: Client, workflowId: string): Promise<WorkflowProgress> {
  const task = await pendingTask(client, workflowId);
  if (task.kind === 'closed') return task;
  const { runId, attempt } = task;
  if (attempt < 2) return { kind: 'running', runId };
  // Temporal keeps the first failure of a run of failed attempts in history; later ones only count the attempts.
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const failed = [...(history.events ?? [])].reverse().find((e) => e.workflowTaskFailedEventAttributes);
  const attrs = failed?.workflowTaskFailedEventAttributes;
  const NONDETERMINISTIC =
    temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR;
  const message = attrs?.failure?.message ?? NO_FAILURE_RECORDED;
  const cause = attrs?.cause === NONDETERMINISTIC ? 'nondeterminism' : workflowTaskFailureCause(message);
  return { kind: 'failing', cause, attempt, runId, message: message.slice(0, 300) };
}

/** The latest run's workflow task attempt (1 when none is failing), or how the workflow closed. */
export async function pendingTask(
  client: Client,
  workflowId: string,
): Promise<{ kind: 'open'; runId: string; attempt: number } | { kind: 'closed'; status: string }> {
  try {
    const described = await client.workflow.getHandle(workflowId).describe();
    if (described.status.name !== 'RUNNING') return { kind: 'closed', status: described.status.name };
    return { kind: 'open', runId: described.runId, attempt: described.raw.pendingWorkflowTask?.attempt ?? 1 };
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { kind: 'closed', status: 'NOT_FOUND' };
    throw err;
  }
}

/** One line for a person: "workflow task failing (nondeterminism, attempt 9)", "still running", "closed (…)". */
export function describeProgress(p: WorkflowProgress): string {
  if (p.kind === 'failing') return `workflow task failing (${p.cause}, attempt ${p.attempt})`;
  if (p.kind === 'running') return 'still running';
  return p.status === 'NOT_FOUND' ? 'not running' : `closed (${p.status.toLowerCase()})`;
}
