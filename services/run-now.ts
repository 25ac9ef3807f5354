import { randomUUID } from 'node:crypto';
import type { Client, WorkflowStartOptions } from '@temporalio/client';
import { runNowWorkflowId } from '../domain/ids';

/** What a Schedule starts: its workflow, where, with what (Temporal's own description of a start action). */
export type ScheduledStart = Pick<
  WorkflowStartOptions,
  'taskQueue' | 'args' | 'typedSearchAttributes' | 'memo' | 'staticSummary'
> & { workflowType: Parameters<Client['workflow']['start']>[0] };

/**
 * "Run now" for a job or a routine: the action Keel gives its Schedule, started directly under a unique workflow id.
 * Not the Schedule's trigger: a triggered fire's workflow id ends in its second, so a run-now in the same second as
 * the previous fire (still closing) is refused by Temporal and dropped without a word. Not the Schedule's own
 * description either: that is a query of the server's scheduler, which a busy server answers late or not at all
 * (DEADLINE_EXCEEDED), so "run now" would fail when it is most used.
 */
export async function startActionNow(client: Client, scheduleId: string, action: ScheduledStart): Promise<void> {
  await client.workflow.start(action.workflowType, {
    workflowId: runNowWorkflowId(scheduleId, randomUUID()),
    taskQueue: action.taskQueue,
    args: action.args,
    typedSearchAttributes: action.typedSearchAttributes,
    memo: action.memo,
    staticSummary: action.staticSummary,
  });
}
