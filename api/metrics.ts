import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { Pool } from '../db/pool';

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
    'Model tokens by direction: in, out, cached (read from cache) and cache_write',
    ['direction'],
    `SELECT d.direction, coalesce(sum(d.n), 0) AS n FROM model_calls m
     CROSS JOIN LATERAL (VALUES ('in', m.input_tokens), ('out', m.output_tokens), ('cached', m.cache_read_tokens),
       ('cache_write', m.cache_write_tokens)) AS d(direction, n)
     GROUP BY d.direction`,
  );
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
