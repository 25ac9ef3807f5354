import { proxyActivities } from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import type { DeletionInput, DeletionOutcome } from '../contracts/deletion';

/**
 * Each step is idempotent and waits out an outage of Temporal or PostgreSQL: a deletion is never left half done. They
 * heartbeat, so a step held by a killed worker is retried elsewhere after 10 s, however long a large agent takes.
 */
const deletion = proxyActivities<KeelActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/**
 * A person deletes a conversation, or an agent with everything it owns. It was marked as it was asked for, so the API
 * refuses writes to it. First nothing of it runs any more (the writes that began before the mark are waited out, its
 * Schedules and open workflows end), then what it kept is erased, then the audit trail says it is done and it takes
 * writes again. A worker killed halfway leaves the workflow to go on from the step it was in.
 */
export async function deletionWorkflow(input: DeletionInput): Promise<DeletionOutcome> {
  const ended = await deletion.endDeletedWork(input);
  const erased = await deletion.eraseDeleted(input);
  // Ended again after erasing: a run the Schedule started just before it was deleted is not left writing.
  const late = await deletion.endDeletedWork(input);
  const outcome: DeletionOutcome = {
    conversations: erased.conversations,
    workflowsEnded: ended.workflowsEnded + late.workflowsEnded,
    schedulesDeleted: ended.schedulesDeleted + late.schedulesDeleted,
    // Undefined when replaying a deletion whose erase counted no rows yet.
    rowsErased: erased.rowsErased,
  };
  await deletion.recordDeletionFinished(input, outcome);
  return outcome;
}
