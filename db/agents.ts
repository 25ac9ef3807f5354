import type { Delivery, DestinationBook, Destinations } from '../domain/delivery';
import type { Budgets } from '../domain/spend';
import type { Queryable } from './pool';

export interface AgentRow {
  id: string;
  name: string;
  model: string | null;
  systemPrompt: string | null;
  ownerDelivery: Delivery | null;
  /** Named destinations a person configured; the model may name them, never write a target of its own. */
  destinations: Destinations;
  reflectionEnabled: boolean;
  budgets: Budgets;
  createdAt: string;
  updatedAt: string;
}

export interface AgentRecord {
  id: string;
  name: string;
  model: string | null;
  system_prompt: string | null;
  owner_delivery: Delivery | null;
  destinations: Destinations;
  reflection_enabled: boolean;
  budgets: Budgets;
  created_at: Date;
  updated_at: Date;
}

export const toAgent = (r: AgentRecord): AgentRow => ({
  id: r.id,
  name: r.name,
  model: r.model,
  systemPrompt: r.system_prompt,
  ownerDelivery: r.owner_delivery,
  destinations: r.destinations,
  reflectionEnabled: r.reflection_enabled,
  budgets: r.budgets,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/**
 * Agents come into being on first use, with defaults: the agent's id is $1 (also a statement's first part). Not while
 * the agent's deletion runs: a step still under way when it began (a model call's, a read's) cannot bring back the
 * row it erased, and whatever hangs on the row has nothing to hang on.
 */
export const ENSURE_AGENT_SQL = `INSERT INTO agents (id, name) SELECT $1::text, $1::text
  WHERE NOT EXISTS (SELECT 1 FROM running_deletions WHERE agent_id = $1 AND conversation_id IS NULL)
  ON CONFLICT (id) DO NOTHING`;

export async function ensureAgent(db: Queryable, agentId: string): Promise<void> {
  await db.query(ENSURE_AGENT_SQL, [agentId]);
}

/**
 * The agent's row, created if new, held until the transaction ends: an agent's numbered or counted writes (task
 * numbers, the job limit, memory versions) never interleave.
 */
export async function lockAgent(db: Queryable, agentId: string): Promise<void> {
  await ensureAgent(db, agentId);
  await db.query('SELECT 1 FROM agents WHERE id = $1 FOR UPDATE', [agentId]);
}

export async function getAgent(db: Queryable, agentId: string): Promise<AgentRow | undefined> {
  const { rows } = await db.query<AgentRecord>('SELECT * FROM agents WHERE id = $1', [agentId]);
  return rows[0] ? toAgent(rows[0]) : undefined;
}

/** What a model's destination name may resolve to, for this agent (none configured when the agent is new). */
export async function destinationBook(db: Queryable, agentId: string): Promise<DestinationBook> {
  const agent = await getAgent(db, agentId);
  return { destinations: agent?.destinations ?? {}, ownerDelivery: agent?.ownerDelivery ?? null };
}

export interface AgentSettings {
  name: string;
  model?: string;
  systemPrompt?: string;
  owner?: { delivery: Delivery };
  /** Replaces the agent's destinations (none when absent, as PUT replaces the rest). */
  destinations?: Destinations;
  reflection?: { enabled: boolean };
  /** Replaces the agent's budgets (none when absent). */
  budgets?: Budgets;
}

export async function upsertAgent(db: Queryable, agentId: string, s: AgentSettings): Promise<AgentRow> {
  const { rows } = await db.query<AgentRecord>(
    `INSERT INTO agents (id, name, model, system_prompt, owner_delivery, destinations, reflection_enabled, budgets)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, model = EXCLUDED.model,
       system_prompt = EXCLUDED.system_prompt, owner_delivery = EXCLUDED.owner_delivery,
       destinations = EXCLUDED.destinations,
       reflection_enabled = EXCLUDED.reflection_enabled, budgets = EXCLUDED.budgets, updated_at = now()
     RETURNING *`,
    [
      agentId,
      s.name,
      s.model ?? null,
      s.systemPrompt ?? null,
      s.owner ? JSON.stringify(s.owner.delivery) : null,
      JSON.stringify(s.destinations ?? {}),
      s.reflection?.enabled ?? false,
      JSON.stringify(s.budgets ?? {}),
    ],
  );
  return toAgent(rows[0]!);
}
