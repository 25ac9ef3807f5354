import { collectDefaultMetrics, Gauge, Registry, type MetricType } from 'prom-client';
import type { Pool } from '../db/pool';
import { budgetsRemaining, toolCallDurations, totals as readTotals, type TotalsName } from '../services/metrics';

/**
 * Keel's metrics, read from PostgreSQL when Prometheus scrapes: the totals hold across every worker process and every
 * restart, because they count what was committed. Each series is a running total (a counter in meaning).
 */
export function createMetrics(pool: Pool, opts: { workerMetricsUrl?: string } = {}) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'keel_api_' });

  const totals = (name: string, help: string, labelNames: string[], query: TotalsName) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const rows = await readTotals(pool, query);
        this.reset();
        for (const r of rows)
          this.set(Object.fromEntries(labelNames.map((l) => [l, String(r[l] ?? 'none')])), Number(r.n));
      },
    });

  totals('keel_turns_total', 'Turns of conversations, by status', ['status'], 'turns');
  totals(
    'keel_model_calls_total',
    'Model calls that reached a provider, by provider and outcome',
    ['provider', 'outcome'],
    'modelCalls',
  );
  totals(
    'keel_model_tokens_total',
    'Model tokens by what the call was for (turn, delegate, job), model and direction: in, out, cached, cache_write',
    ['kind', 'model', 'direction'],
    'modelTokens',
  );
  totals(
    'keel_spend_usd_total',
    'What model calls cost in USD, by agent (settled calls, docs/spend.md)',
    ['agent'],
    'spendUsd',
  );
  budgetRemaining(registry, pool);
  totals(
    'keel_deliveries_total',
    'Deliveries by outcome (delivered, skipped, dropped, error, pending)',
    ['outcome'],
    'deliveries',
  );
  totals('keel_job_runs_total', 'Scheduled job runs by status', ['status'], 'jobRuns');
  totals('keel_routine_runs_total', 'Routine runs by status', ['status'], 'routineRuns');
  totals(
    'keel_delegate_outcomes_total',
    'Delegates by terminal outcome (none: still running)',
    ['outcome'],
    'delegateOutcomes',
  );
  totals('keel_reflection_proposals_total', 'Reflection proposals by status', ['status'], 'proposals');

  totals(
    'keel_tool_calls_total',
    "Calls of tool servers' tools that ended, by server, tool and outcome (ok, error, unknown, rejected, expired, …)",
    ['server', 'tool', 'outcome'],
    'toolCalls',
  );
  new ToolCallDurations(registry, pool);
  totals(
    'keel_workflow_task_failures_total',
    'Workflow tasks that failed, by workflow type and cause (nondeterminism, error), as the workers saw them',
    ['type', 'cause'],
    'workflowTaskFailures',
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

/** What is left of each agent's daily and monthly budget now (services/metrics.ts). */
function budgetRemaining(registry: Registry, pool: Pool): void {
  new Gauge({
    name: 'keel_budget_remaining_usd',
    help: "What is left of each agent's daily and monthly budget, in USD",
    labelNames: ['agent', 'budget'],
    registers: [registry],
    async collect() {
      const remaining = await budgetsRemaining(pool);
      this.reset();
      for (const r of remaining) this.set({ agent: r.agent, budget: r.budget }, r.leftUsd);
    },
  });
}

const TOOL_CALL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * keel_tool_call_duration_seconds: a histogram of how long calls of tool servers' tools took, per server and tool,
 * read from the committed calls when Prometheus scrapes (so it holds across workers and restarts). prom-client's
 * Histogram only counts what it observes itself, so this is a metric of its own exposed as a histogram.
 */
class ToolCallDurations extends Gauge<'server' | 'tool' | 'le'> {
  constructor(
    registry: Registry,
    private readonly pool: Pool,
  ) {
    super({
      name: 'keel_tool_call_duration_seconds',
      help: "How long calls of tool servers' tools took, by server and tool",
      labelNames: ['server', 'tool', 'le'],
      registers: [registry],
    });
  }

  override async get(): ReturnType<Gauge<'server' | 'tool' | 'le'>['get']> {
    const name = 'keel_tool_call_duration_seconds';
    const rows = await toolCallDurations(this.pool, TOOL_CALL_BUCKETS);
    const values: { metricName: string; labels: Partial<Record<'server' | 'tool' | 'le', string>>; value: number }[] =
      [];
    const last = TOOL_CALL_BUCKETS[TOOL_CALL_BUCKETS.length - 1];
    for (const r of rows) {
      const labels = { server: r.server, tool: r.tool };
      values.push({ metricName: `${name}_bucket`, labels: { ...labels, le: String(r.le) }, value: r.n });
      if (r.le !== last) continue;
      values.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: r.count });
      values.push({ metricName: `${name}_sum`, labels, value: r.sumSeconds });
      values.push({ metricName: `${name}_count`, labels, value: r.count });
    }
    // prom-client's types declare MetricType a numeric enum; at run time, and in the exposition, it is the name.
    return { ...(await super.get()), type: 'histogram' as unknown as MetricType, values };
  }
}
