import type { Client } from '@temporalio/client';
import { budgetsChanged } from '../contracts/budgets';
import { budgetBlockedDelegates } from '../db/delegates';
import { budgetBlockedRuns } from '../db/jobs';
import type { Queryable } from '../db/pool';
import { delegateWorkflowId } from '../domain/ids';

/**
 * The agent's budgets changed: every delegate and job run waiting for one is told, and calls the model again (it
 * waits once more if the budget still does not allow the call). One that has ended meanwhile needs nothing.
 */
export async function tellBudgetsChanged(db: Queryable, client: Client, agentId: string): Promise<number> {
  const waiting = [
    ...(await budgetBlockedDelegates(db, agentId)).map((id) => delegateWorkflowId(agentId, id)),
    ...(await budgetBlockedRuns(db, agentId)),
  ];
  const told = await Promise.allSettled(
    waiting.map((workflowId) => client.workflow.getHandle(workflowId).signal(budgetsChanged)),
  );
  return told.filter((t) => t.status === 'fulfilled').length;
}
