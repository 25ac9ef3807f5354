/** Routines (the `routines` table): each one's definition and status, its Temporal Schedule aside. */
import type { Delivery } from '../domain/delivery';
import type { RoutineDefinition, RoutineStatus } from '../domain/routines';
import type { PageRequest } from './page';
import type { Queryable } from './pool';

export interface RoutineRow {
  agentId: string;
  appId: string;
  slug: string;
  label: string;
  schedule: RoutineDefinition['schedule'];
  cron: string;
  prompt: string | null;
  playbook: string | null;
  delivery: Delivery | null;
  /** The routine's own budget for each run (USD); null: the agent's perRoutineRunUsd applies. */
  budgetUsd: number | null;
  status: RoutineStatus;
  createdAt: string;
  updatedAt: string;
}

/** A row as PostgreSQL returns it: the columns named alike, and the snake_case ones. */
interface RoutineDbRow extends Pick<
  RoutineRow,
  'slug' | 'label' | 'schedule' | 'cron' | 'prompt' | 'playbook' | 'delivery' | 'status'
> {
  agent_id: string;
  app_id: string;
  budget_usd: string | null;
  created_at: Date;
  updated_at: Date;
}

const routineOf = (r: RoutineDbRow): RoutineRow => ({
  agentId: r.agent_id,
  appId: r.app_id,
  slug: r.slug,
  label: r.label,
  schedule: r.schedule,
  cron: r.cron,
  prompt: r.prompt,
  playbook: r.playbook,
  delivery: r.delivery,
  budgetUsd: r.budget_usd === null ? null : Number(r.budget_usd),
  status: r.status,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/** Creates or updates a routine's definition; its status (active or paused) is never changed by an edit. */
export async function putRoutine(
  db: Queryable,
  agentId: string,
  appId: string,
  slug: string,
  def: RoutineDefinition,
  cron: string,
): Promise<{ routine: RoutineRow; created: boolean }> {
  const { rows } = await db.query<RoutineDbRow & { created: boolean }>(
    `INSERT INTO routines (agent_id, app_id, slug, label, schedule, cron, prompt, playbook, delivery, budget_usd)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (agent_id, app_id, slug) DO UPDATE
       SET label = EXCLUDED.label, schedule = EXCLUDED.schedule, cron = EXCLUDED.cron,
           prompt = EXCLUDED.prompt, playbook = EXCLUDED.playbook, delivery = EXCLUDED.delivery,
           budget_usd = EXCLUDED.budget_usd, updated_at = now()
     RETURNING *, (xmax = 0) AS created`,
    [
      agentId,
      appId,
      slug,
      def.label,
      JSON.stringify(def.schedule),
      cron,
      def.prompt ?? null,
      def.playbook ?? null,
      def.delivery ? JSON.stringify(def.delivery) : null,
      def.budgetUsd ?? null,
    ],
  );
  return { routine: routineOf(rows[0]!), created: rows[0]!.created };
}

export async function getRoutine(
  db: Queryable,
  agentId: string,
  appId: string,
  slug: string,
  forUpdate = false,
): Promise<RoutineRow | undefined> {
  const { rows } = await db.query<RoutineDbRow>(
    `SELECT * FROM routines WHERE agent_id = $1 AND app_id = $2 AND slug = $3${forUpdate ? ' FOR UPDATE' : ''}`,
    [agentId, appId, slug],
  );
  return rows[0] && routineOf(rows[0]);
}

/** An app's routines by slug, a page at a time (`after`: the last slug of the page before). */
export async function listRoutines(
  db: Queryable,
  agentId: string,
  appId: string,
  page: PageRequest<string>,
): Promise<RoutineRow[]> {
  const { rows } = await db.query<RoutineDbRow>(
    `SELECT * FROM routines WHERE agent_id = $1 AND app_id = $2 AND ($3::text IS NULL OR slug > $3)
      ORDER BY slug LIMIT $4`,
    [agentId, appId, page.after ?? null, page.limit],
  );
  return rows.map(routineOf);
}

/** The labels of these routines, by `agentId/appId/slug` (a routine deleted since is absent). */
export async function routineLabels(
  db: Queryable,
  refs: readonly { agentId: string; appId: string; slug: string }[],
): Promise<Map<string, string>> {
  const { rows } = await db.query<{ agent_id: string; app_id: string; slug: string; label: string }>(
    `SELECT r.agent_id, r.app_id, r.slug, r.label FROM routines r
       JOIN unnest($1::text[], $2::text[], $3::text[]) AS k (agent_id, app_id, slug)
         ON (r.agent_id, r.app_id, r.slug) = (k.agent_id, k.app_id, k.slug)`,
    [refs.map((r) => r.agentId), refs.map((r) => r.appId), refs.map((r) => r.slug)],
  );
  return new Map(rows.map((r) => [routineRef({ agentId: r.agent_id, appId: r.app_id, slug: r.slug }), r.label]));
}

/** A routine's key in routineLabels' answer. */
export const routineRef = (r: { agentId: string; appId: string; slug: string }) => `${r.agentId}/${r.appId}/${r.slug}`;

export async function setRoutineStatus(
  db: Queryable,
  agentId: string,
  appId: string,
  slug: string,
  from: RoutineStatus,
  to: RoutineStatus,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE routines SET status = $5, updated_at = now()
      WHERE agent_id = $1 AND app_id = $2 AND slug = $3 AND status = $4`,
    [agentId, appId, slug, from, to],
  );
  return rowCount === 1;
}

export async function deleteRoutine(db: Queryable, agentId: string, appId: string, slug: string): Promise<void> {
  await db.query('DELETE FROM routines WHERE agent_id = $1 AND app_id = $2 AND slug = $3', [agentId, appId, slug]);
}
