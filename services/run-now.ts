import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { runNowWorkflowId } from '../domain/ids';

/**
 * "Run now" for a job or a routine: the Schedule's own action, started directly under a unique workflow id. Not the
 * Schedule's trigger: a triggered fire's workflow id ends in its second, so a run-now in the same second as the
 * previous fire (still closing) is refused by Temporal and dropped without a word.
 */
export async function startScheduleActionNow(client: Client, scheduleId: string): Promise<void> {
  const { action } = await client.schedule.getHandle(scheduleId).describe();
  await client.workflow.start(action.workflowType, {
    workflowId: runNowWorkflowId(scheduleId, randomUUID()),
    taskQueue: action.taskQueue,
    args: action.args,
    typedSearchAttributes: action.typedSearchAttributes,
    memo: action.memo,
    staticSummary: action.staticSummary,
  });
}
