/** What an agent's model calls spent, and where its budgets stand: the spend ledger as a person reads it. */
import type { Pool } from '../db/pool';
import { agentBudgets, budgetStatus } from '../db/spend';
import { BUDGET_NAMES, budgetsFor, type BudgetName, type Budgets } from '../domain/spend';

// Reads the API serves as they are.
export { usage, USAGE_GROUPS, type UsageGroup, type UsageRow } from '../db/spend';

/** One of an agent's budgets; what is spent, reserved and left is counted for its calendar (day, month) ones only. */
export interface BudgetStanding {
  name: BudgetName;
  limitUsd: number;
  spentUsd?: number;
  reservedUsd?: number;
  leftUsd?: number;
}

/**
 * The agent's budgets, in BUDGET_NAMES order (an agent not yet in being has the defaults: none; reading it never
 * brings it into being). A per-turn, per-tree or
 * per-run budget counts each turn, tree or run separately, so it has no one standing to show.
 */
export async function budgetStanding(pool: Pool, agentId: string): Promise<BudgetStanding[]> {
  const budgets = await agentBudgets(pool, agentId);
  const standing = await calendarStanding(pool, agentId, budgets);
  return BUDGET_NAMES.flatMap((name) => {
    const limitUsd = budgets[name];
    if (limitUsd === undefined) return [];
    const s = standing.find((b) => b.name === name);
    return [{ name, limitUsd, ...(s ? { spentUsd: s.spentUsd, reservedUsd: s.reservedUsd, leftUsd: s.leftUsd } : {}) }];
  });
}

/** Where an agent's calendar budgets (day, month) stand now: limit, spent, reserved and left. */
export async function calendarStanding(pool: Pool, agentId: string, budgets: Budgets) {
  return budgetStatus(pool, agentId, budgetsFor({ agentId, kind: 'turn' }, budgets, new Date()));
}
