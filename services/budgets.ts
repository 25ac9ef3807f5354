import type { Client } from '@temporalio/client';
import { budgetsChanged } from '../contracts/delegate';
import { budgetBlockedDelegates } from '../db/delegates';
import type { Queryable } from '../db/pool';
import { delegateWorkflowId } from '../domain/ids';

/**
 * The agent's budgets changed: every delegate waiting for one is told, and calls the model again (it waits once more
 * if the budget still does not allow the call). A delegate that has ended meanwhile needs nothing.
 */
export async function tellBudgetsChanged(db: Queryable, client: Client, agentId: string): Promise<number> {
  const waiting = await budgetBlockedDelegates(db, agentId);
  const told = await Promise.allSettled(
    waiting.map((id) => client.workflow.getHandle(delegateWorkflowId(agentId, id)).signal(budgetsChanged)),
  );
  return told.filter((t) => t.status === 'fulfilled').length;
}
