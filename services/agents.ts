/** An agent's settings as a person configures and reads them; agents come into being on first use, with defaults. */
import type { Client } from '@temporalio/client';
import { getAgent, lockAgent, upsertAgent, type AgentRow, type AgentSettings } from '../db/agents';
import { listAgents, type AgentSummary } from '../db/agent-list';
import { recordAudit } from '../db/audit';
import { inTransaction, type Pool } from '../db/pool';
import { destinationChange } from '../domain/audit';
import { sameJson } from '../domain/canonical-json';
import { tellBudgetsChanged } from './budgets';

export type { AgentRow, AgentSettings, AgentSummary };
export { listAgents };

/**
 * Creates or configures an agent. A change of where it delivers (its owner or a named destination), or of its
 * budgets, goes into the audit trail with it. Delegates and job runs waiting for a budget are then told: the budgets
 * may have changed.
 */
export async function configureAgent(
  pool: Pool,
  temporal: Client,
  agentId: string,
  settings: AgentSettings,
  actor: string,
): Promise<AgentRow> {
  const saved = await inTransaction(pool, async (db) => {
    // Locked (created with defaults if new) so that concurrent edits each compare against what they replace.
    await lockAgent(db, agentId);
    const before = (await getAgent(db, agentId))!;
    const after = await upsertAgent(db, agentId, settings);
    const at = (a: AgentRow) => ({ owner: a.ownerDelivery, destinations: a.destinations });
    const change = destinationChange(at(before), at(after));
    if (change)
      await recordAudit(db, { agentId, action: 'agent.destinations', actor, subject: agentId, detail: change });
    if (!sameJson(before.budgets, after.budgets)) {
      const detail = { from: before.budgets, to: after.budgets };
      await recordAudit(db, { agentId, action: 'agent.budgets', actor, subject: agentId, detail });
    }
    return after;
  });
  // Delegates waiting for a budget go on once the budgets change (they wait again if still not allowed).
  await tellBudgetsChanged(pool, temporal, agentId);
  return saved;
}

/**
 * The agent as it is; undefined until it is first used (configured, or written to: a message, a task, …), and again
 * once it is deleted. Reading it creates nothing, so a deleted agent stays deleted until someone uses it again.
 */
export async function agentOf(pool: Pool, agentId: string): Promise<AgentRow | undefined> {
  return getAgent(pool, agentId);
}
