import {
  agentsWithCalendarBudgets,
  readTotals,
  toolCallDurations,
  type TotalsName,
  type TotalsRow,
} from '../db/metrics';
import type { Pool } from '../db/pool';
import { calendarStanding } from './spend';

export type { TotalsName, TotalsRow };

/** A running total of /metrics, by its labels (db/metrics.ts). */
export const totals = (pool: Pool, name: TotalsName): Promise<TotalsRow[]> => readTotals(pool, name);

/** What is left of each agent's daily and monthly budget now: limit less spent and reserved (docs/spend.md). */
export async function budgetsRemaining(pool: Pool): Promise<{ agent: string; budget: string; leftUsd: number }[]> {
  const remaining: { agent: string; budget: string; leftUsd: number }[] = [];
  for (const agent of await agentsWithCalendarBudgets(pool)) {
    for (const b of await calendarStanding(pool, agent.id, agent.budgets)) {
      remaining.push({ agent: agent.id, budget: b.name, leftUsd: b.leftUsd });
    }
  }
  return remaining;
}

export { toolCallDurations };
