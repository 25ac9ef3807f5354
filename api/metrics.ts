import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { Pool } from '../db/pool';
import { budgetStatus } from '../db/spend';
import { WORKFLOW_TASK_FAILURE_TOTALS_SQL } from '../db/workflow-task-failures';
import { budgetsFor, type Budgets } from '../domain/spend';

/**
 * Keel's metrics, read from PostgreSQL when Prometheus scrapes: the totals hold across every worker process and every
 * restart, because they count what was committed. Each series is a running total (a counter in meaning).
 */
export function createMetrics(pool: Pool, opts: { workerMetricsUrl?: string } = {}) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'keel_api_' });

  const totals = (name: string, help: string, labelNames: string[], sql: string) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const { rows } = await pool.query<Record<string, string | number | null>>(sql);
        this.reset();
        for (const r of rows)
          this.set(Object.fromEntries(labelNames.map((l) => [l, String(r[l] ?? 'none')])), Number(r.n));
      },
    });

  totals(
    'keel_turns_total',
    'Turns of conversations, by status',
    ['status'],
    'SELECT status, count(*) AS n FROM turns GROUP BY status',
  );
  totals(
    'keel_model_calls_total',
    'Model calls that reached a provider, by provider and outcome',
    ['provider', 'outcome'],
    `SELECT provider, CASE WHEN error IS NULL THEN 'ok' ELSE 'error' END AS outcome, count(*) AS n
     FROM model_calls GROUP BY 1, 2`,
  );
  totals(
    'keel_model_tokens_total',
    'Model tokens by what the call was for (turn, delegate, job), model and direction: in, out, cached, cache_write',
    ['kind', 'model', 'direction'],
    `SELECT s.kind, s.model, d.direction, coalesce(sum(d.n), 0) AS n FROM model_spend s
     CROSS JOIN LATERAL (VALUES ('in', s.input_tokens), ('out', s.output_tokens), ('cached', s.cache_read_tokens),
       ('cache_write', s.cache_write_tokens)) AS d(direction, n)
     GROUP BY 1, 2, 3`,
  );
  totals(
    'keel_spend_usd_total',
    'What model calls cost in USD, by agent (settled calls, docs/spend.md)',
    ['agent'],
    'SELECT agent_id AS agent, sum(cost_usd) AS n FROM model_spend GROUP BY agent_id',
  );
  budgetRemaining(registry, pool);
  totals(
    'keel_deliveries_total',
    'Deliveries by outcome (delivered, skipped, dropped, error, pending)',
    ['outcome'],
    `SELECT coalesce(split_part(outcome, ':', 1), 'pending') AS outcome, count(*) AS n FROM deliveries GROUP BY 1`,
  );
  totals(
    'keel_job_runs_total',
    'Scheduled job runs by status',
    ['status'],
    'SELECT status, count(*) AS n FROM job_runs GROUP BY status',
  );
  totals(
    'keel_routine_runs_total',
    'Routine runs by status',
    ['status'],
    'SELECT status, count(*) AS n FROM routine_runs GROUP BY status',
  );
  totals(
    'keel_delegate_outcomes_total',
    'Delegates by terminal outcome (none: still running)',
    ['outcome'],
    'SELECT outcome_kind AS outcome, count(*) AS n FROM delegates GROUP BY outcome_kind',
  );
  totals(
    'keel_reflection_proposals_total',
    'Reflection proposals by status',
    ['status'],
    'SELECT status, count(*) AS n FROM proposals GROUP BY status',
  );

  totals(
    'keel_workflow_task_failures_total',
    'Workflow tasks that failed, by workflow type and cause (nondeterminism, error), as the workers saw them',
    ['type', 'cause'],
    WORKFLOW_TASK_FAILURE_TOTALS_SQL,
  );

  return {
    contentType: registry.contentType,
    /** Keel's series, then the Temporal worker's own metrics when a worker exposes them (KEEL_WORKER_METRICS_URL). */
    async text(): Promise<string> {
      const own = await registry.metrics();
      if (!opts.workerMetricsUrl) return own;
      const worker = await fetch(opts.workerMetricsUrl, { signal: AbortSignal.timeout(2_000) })
        .then((r) => (r.ok ? r.text() : ''))
        .catch(() => '');
      return worker ? `${own}\n# The Temporal worker's metrics (${opts.workerMetricsUrl})\n${worker}` : own;
    },
  };
}

/** What is left of each agent's daily and monthly budget now: limit less spent and reserved (docs/spend.md). */
function budgetRemaining(registry: Registry, pool: Pool): void {
  new Gauge({
    name: 'keel_budget_remaining_usd',
    help: "What is left of each agent's daily and monthly budget, in USD",
    labelNames: ['agent', 'budget'],
    registers: [registry],
    async collect() {
      const { rows } = await pool.query<{ id: string; budgets: Budgets }>(
        `SELECT id, budgets FROM agents WHERE budgets ?| array['dailyUsd', 'monthlyUsd']`,
      );
      this.reset();
      for (const agent of rows) {
        const calendar = budgetsFor({ agentId: agent.id, kind: 'turn' }, agent.budgets, new Date());
        for (const b of await budgetStatus(pool, agent.id, calendar)) {
          this.set({ agent: agent.id, budget: b.name }, b.leftUsd);
        }
      }
    },
  });
}
