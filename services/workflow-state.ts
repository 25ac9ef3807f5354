import { WorkflowNotFoundError, type Client, type WorkflowExecutionStatusName } from '@temporalio/client';

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
