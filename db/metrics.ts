import type { Budgets } from '../domain/spend';
import type { Queryable } from './pool';

/**
 * The running totals /metrics reports, each one query over what was committed (so they hold across every worker
 * process and restart): label columns, and `n`.
 */
const TOTALS = {
  turns: 'SELECT status, count(*) AS n FROM turns GROUP BY status',
  modelCalls: `SELECT provider, CASE WHEN error IS NULL THEN 'ok' ELSE 'error' END AS outcome, count(*) AS n
     FROM model_calls GROUP BY 1, 2`,
  modelTokens: `SELECT s.kind, s.model, d.direction, coalesce(sum(d.n), 0) AS n FROM model_spend s
     CROSS JOIN LATERAL (VALUES ('in', s.input_tokens), ('out', s.output_tokens), ('cached', s.cache_read_tokens),
       ('cache_write', s.cache_write_tokens)) AS d(direction, n)
     GROUP BY 1, 2, 3`,
  spendUsd: 'SELECT agent_id AS agent, sum(cost_usd) AS n FROM model_spend GROUP BY agent_id',
  deliveries: `SELECT coalesce(split_part(outcome, ':', 1), 'pending') AS outcome, count(*) AS n
     FROM deliveries GROUP BY 1`,
  jobRuns: 'SELECT status, count(*) AS n FROM job_runs GROUP BY status',
  routineRuns: 'SELECT status, count(*) AS n FROM routine_runs GROUP BY status',
  delegateOutcomes: 'SELECT outcome_kind AS outcome, count(*) AS n FROM delegates GROUP BY outcome_kind',
  proposals: 'SELECT status, count(*) AS n FROM proposals GROUP BY status',
  toolCalls: `SELECT server, tool, status AS outcome, count(*) AS n FROM tool_calls
     WHERE status NOT IN ('prepared', 'awaiting_approval', 'approved', 'running') GROUP BY 1, 2, 3`,
  workflowTaskFailures: `SELECT workflow_type AS type, cause, sum(failures) AS n
     FROM workflow_task_failures GROUP BY 1, 2`,
} as const;

export type TotalsName = keyof typeof TOTALS;

/** One labelled total: its label columns, and `n`. */
export type TotalsRow = Record<string, string | number | null>;

export async function readTotals(db: Queryable, name: TotalsName): Promise<TotalsRow[]> {
  const { rows } = await db.query<TotalsRow>(TOTALS[name]);
  return rows;
}

/** Agents with a daily or monthly budget, for keel_budget_remaining_usd. */
export async function agentsWithCalendarBudgets(db: Queryable): Promise<{ id: string; budgets: Budgets }[]> {
  const { rows } = await db.query<{ id: string; budgets: Budgets }>(
    `SELECT id, budgets FROM agents WHERE budgets ?| array['dailyUsd', 'monthlyUsd']`,
  );
  return rows;
}

/** Tool calls that reached their server, per server and tool: how many took at most each bucket's seconds. */
export async function toolCallDurations(
  db: Queryable,
  bucketsSeconds: readonly number[],
): Promise<{ server: string; tool: string; le: number; n: number; count: number; sumSeconds: number }[]> {
  const { rows } = await db.query<{
    server: string;
    tool: string;
    le: number;
    n: string;
    count: string;
    sum_seconds: number;
  }>(
    `SELECT c.server, c.tool, b.le,
            count(*) FILTER (WHERE c.duration_ms <= b.le * 1000) AS n,
            count(*) AS count, coalesce(sum(c.duration_ms), 0) / 1000.0 AS sum_seconds
       FROM tool_calls c CROSS JOIN unnest($1::float8[]) AS b(le)
      WHERE c.duration_ms IS NOT NULL
      GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
    [bucketsSeconds],
  );
  return rows.map((r) => ({
    server: r.server,
    tool: r.tool,
    le: Number(r.le),
    n: Number(r.n),
    count: Number(r.count),
    sumSeconds: Number(r.sum_seconds),
  }));
}
