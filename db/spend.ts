import type { CallSpend, ModelUsage } from '../domain/model';
import {
  overrunOf,
  RESERVATION_HOLD_MS,
  type BudgetLimit,
  type BudgetName,
  type BudgetScope,
  type Overrun,
  type Budgets,
  type Payer,
} from '../domain/spend';
import { inTransaction, type Pool, type Queryable } from './pool';
import { spendLockKey } from '../domain/ids';

/** A budget that the call's worst case would overrun: which one, its limit, and what is already counted against it. */
export type { Overrun };

const HOLD_SECONDS = RESERVATION_HOLD_MS / 1000;

/** The spend_totals period of a UTC day or month, for a timestamp in SQL: 'day:YYYY-MM-DD' or 'month:YYYY-MM'. */
const periodOf = (period: 'day' | 'month', at: string) =>
  period === 'day'
    ? `'day:' || to_char((${at}) AT TIME ZONE 'UTC', 'YYYY-MM-DD')`
    : `'month:' || to_char((${at}) AT TIME ZONE 'UTC', 'YYYY-MM')`;

/**
 * What counts against one budget now: the settled cost of the calls in its scope, and their holds young enough to
 * belong to a live call. A call's own hold is left out when it is the one reserving again. A day's or month's cost is
 * its one row of spend_totals, so a reservation costs the same however many calls the period already had.
 */
async function counted(
  db: Queryable,
  agentId: string,
  scope: BudgetScope,
  exceptCallKey = '',
): Promise<{ spentUsd: number; heldUsd: number }> {
  const young = 'held_usd > 0 AND held_at > now() - make_interval(secs => $3) AND call_key <> $4';
  const { rows } = await db.query<{ spent: string; held: string }>(
    'period' in scope
      ? `SELECT coalesce((SELECT spent_usd FROM spend_totals
                           WHERE agent_id = $1 AND period = ${periodOf(scope.period, '$2::timestamptz')}), 0) AS spent,
                coalesce((SELECT sum(held_usd) FROM model_spend
                           WHERE agent_id = $1 AND created_at >= $2 AND ${young}), 0) AS held`
      : `SELECT coalesce(sum(cost_usd), 0) AS spent,
                coalesce(sum(held_usd) FILTER (WHERE ${young}), 0) AS held
           FROM model_spend WHERE agent_id = $1 AND ${scope.column} = $2 AND call_key <> $4`,
    [agentId, 'period' in scope ? scope.since : scope.value, HOLD_SECONDS, exceptCallKey],
  );
  return { spentUsd: Number(rows[0]!.spent), heldUsd: Number(rows[0]!.held) };
}

/**
 * Reserves a call's worst case against every budget that applies, in one transaction that holds the agent's spend
 * lock: concurrent calls of one agent reserve one after another, so together they never pass a budget. The call's
 * own earlier hold (a retry after a crash) is replaced, not added to. Answers the first budget it would overrun, or
 * nothing when the hold is placed.
 */
export async function reserve(
  pool: Pool,
  r: { callKey: string; payer: Payer; model: string; worstUsd: number; budgets: BudgetLimit[] },
): Promise<Overrun | undefined> {
  // No budget to check: the hold alone, one statement under the same lock.
  if (r.budgets.length === 0) {
    await hold(pool, r);
    return undefined;
  }
  return inTransaction(pool, async (db) => {
    await db.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [spendLockKey(r.payer.agentId)]);
    for (const b of r.budgets) {
      const overrun = overrunOf(b, await counted(db, r.payer.agentId, b.scope, r.callKey), r.worstUsd);
      if (overrun) return overrun;
    }
    await hold(db, r);
    return undefined;
  });
}

/** Places (or replaces) a call's hold, holding the agent's spend lock until its transaction ends. */
async function hold(db: Queryable, r: { callKey: string; payer: Payer; model: string; worstUsd: number }) {
  const p = r.payer;
  await db.query(
    `WITH lock AS (SELECT pg_advisory_xact_lock(hashtextextended($14, 0)))
     INSERT INTO model_spend (call_key, agent_id, kind, model, conversation_key, turn_id, delegate_id,
       root_conversation_key, job_id, job_run_id, routine_run_id, proposal_id, held_usd, held_at, reserved_usd)
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::numeric, now(), $13::numeric FROM lock
     ON CONFLICT (call_key) DO UPDATE SET held_usd = EXCLUDED.held_usd, held_at = now(),
       reserved_usd = EXCLUDED.reserved_usd, model = EXCLUDED.model, updated_at = now()`,
    [
      r.callKey,
      p.agentId,
      p.kind,
      r.model,
      p.conversationKey ?? null,
      p.turnId ?? null,
      p.delegateId ?? null,
      p.rootConversationKey ?? null,
      p.jobId ?? null,
      p.jobRunId ?? null,
      p.routineRunId ?? null,
      p.proposalId ?? null,
      r.worstUsd,
      spendLockKey(p.agentId),
    ],
  );
}

const SPEND_COLUMNS =
  'model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, reserved_usd';
export type SpendRow = Record<'model' | 'input_tokens' | 'output_tokens' | 'cache_read_tokens', string> &
  Record<'cache_write_tokens' | 'cost_usd' | 'reserved_usd', string>;

export const spendOf = (r: SpendRow | undefined): CallSpend | undefined =>
  r && {
    model: r.model,
    inputTokens: Number(r.input_tokens),
    outputTokens: Number(r.output_tokens),
    cacheReadTokens: Number(r.cache_read_tokens),
    cacheWriteTokens: Number(r.cache_write_tokens),
    costUsd: Number(r.cost_usd),
    reservedUsd: Number(r.reserved_usd),
  };

/** What a call's settle writes: its cost, for one attempt. */
export interface Settle {
  callKey: string;
  attempt: number;
  model: string;
  usage: ModelUsage;
  costUsd: number;
}

/**
 * A call's settle as two parts of a statement's WITH (`settled`, which returns the call's spend, and `totals`), its
 * parameters numbered from `first`; `after` names a part of the same statement to run first (its locks first).
 */
export function settleSql(first: number, s: Settle, after?: string): { sql: string; params: unknown[] } {
  const $ = (i: number) => `$${first + i}`;
  const sql = `settled AS (
       UPDATE model_spend SET held_usd = 0, held_at = NULL, model = ${$(2)}, cost_usd = cost_usd + ${$(3)},
         input_tokens = input_tokens + ${$(4)}, output_tokens = output_tokens + ${$(5)},
         cache_read_tokens = cache_read_tokens + ${$(6)}, cache_write_tokens = cache_write_tokens + ${$(7)},
         settled_attempts = settled_attempts || ${$(1)}::integer, updated_at = now()
       WHERE call_key = ${$(0)} AND NOT (${$(1)}::integer = ANY (settled_attempts))
         ${after ? `AND EXISTS (SELECT 1 FROM ${after})` : ''}
       RETURNING agent_id, created_at, ${SPEND_COLUMNS}),
     totals AS (
       INSERT INTO spend_totals (agent_id, period, spent_usd)
         SELECT agent_id, p, ${$(3)} FROM settled,
                LATERAL (VALUES (${periodOf('day', 'created_at')}), (${periodOf('month', 'created_at')})) AS v (p)
       ON CONFLICT (agent_id, period) DO UPDATE SET spent_usd = spend_totals.spent_usd + EXCLUDED.spent_usd)`;
  const { usage } = s;
  const params = [s.callKey, s.attempt, s.model, s.costUsd, usage.inputTokens, usage.outputTokens];
  return { sql, params: [...params, usage.cacheReadTokens, usage.cacheWriteTokens] };
}

/** The spend a statement with settleSql's parts returns (`settled`), as JSON: none when the attempt had settled. */
export const SETTLED_SPEND_JSON = `(SELECT row_to_json(s) FROM (SELECT ${SPEND_COLUMNS} FROM settled) s)`;

/**
 * Settles a call's hold to what it cost, and adds the cost to its agent's day and month. One attempt settles once
 * (its number is kept), so a retried commit does not count an answer twice, while a retry that called the model
 * again adds its own cost.
 */
export async function settle(db: Queryable, s: Settle): Promise<CallSpend | undefined> {
  // The call's spend as settled comes back with it: undefined when this attempt had settled already.
  const part = settleSql(1, s);
  const { rows } = await db.query<SpendRow>(`WITH ${part.sql} SELECT ${SPEND_COLUMNS} FROM settled`, part.params);
  return spendOf(rows[0]);
}

/** One call's tokens and cost, settled so far. */
export async function callSpend(db: Queryable, callKey: string): Promise<CallSpend | undefined> {
  const { rows } = await db.query<SpendRow>(`SELECT ${SPEND_COLUMNS} FROM model_spend WHERE call_key = $1`, [callKey]);
  return spendOf(rows[0]);
}

/** Gives a hold back: the call failed before the model answered. */
export async function release(db: Queryable, callKey: string): Promise<void> {
  await db.query('UPDATE model_spend SET held_usd = 0, held_at = NULL, updated_at = now() WHERE call_key = $1', [
    callKey,
  ]);
}

/** What is counted against each of these budgets now. */
export async function budgetStatus(
  db: Queryable,
  agentId: string,
  budgets: BudgetLimit[],
): Promise<{ name: BudgetName; limitUsd: number; spentUsd: number; reservedUsd: number; leftUsd: number }[]> {
  const out = [];
  for (const b of budgets) {
    const { spentUsd, heldUsd: reservedUsd } = await counted(db, agentId, b.scope);
    out.push({
      name: b.name,
      limitUsd: b.limitUsd,
      spentUsd,
      reservedUsd,
      leftUsd: Math.max(0, b.limitUsd - spentUsd - reservedUsd),
    });
  }
  return out;
}

export async function agentBudgets(db: Queryable, agentId: string): Promise<Budgets> {
  const { rows } = await db.query<{ budgets: Budgets }>('SELECT budgets FROM agents WHERE id = $1', [agentId]);
  return rows[0]?.budgets ?? {};
}

/** The own per-run budget of the job or routine a call's run belongs to, when it has one. */
export async function ownRunBudgetUsd(db: Queryable, payer: Payer): Promise<number | undefined> {
  const { rows } = payer.jobId
    ? await db.query<{ usd: string | null }>('SELECT budget_usd AS usd FROM jobs WHERE id = $1', [payer.jobId])
    : payer.routineRunId
      ? await db.query<{ usd: string | null }>(
          `SELECT r.budget_usd AS usd FROM routine_runs rr
             JOIN routines r USING (agent_id, app_id, slug) WHERE rr.run_id = $1`,
          [payer.routineRunId],
        )
      : { rows: [] };
  const usd = rows[0]?.usd;
  return usd === null || usd === undefined ? undefined : Number(usd);
}

export const USAGE_GROUPS = ['day', 'conversation', 'job', 'routine', 'delegate', 'model'] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

const GROUP_KEY: Record<UsageGroup, string> = {
  day: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  conversation: 'coalesce(root_conversation_key, conversation_key)',
  job: 'job_id',
  routine: 'routine_run_id',
  delegate: 'delegate_id',
  model: 'model',
};

export interface UsageRow {
  key: string | null;
  calls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
}

/** An agent's settled usage in [from, to), grouped. */
export async function usage(
  db: Queryable,
  q: { agentId: string; from: Date; to: Date; groupBy: UsageGroup },
): Promise<UsageRow[]> {
  const key = GROUP_KEY[q.groupBy];
  const { rows } = await db.query<{
    key: string | null;
    calls: string;
    input: string;
    output: string;
    cache_read: string;
    cache_write: string;
    cost: string;
  }>(
    `SELECT ${key} AS key, sum(cardinality(settled_attempts)) AS calls, sum(input_tokens) AS input,
            sum(output_tokens) AS output, sum(cache_read_tokens) AS cache_read,
            sum(cache_write_tokens) AS cache_write, sum(cost_usd) AS cost
       FROM model_spend
      WHERE agent_id = $1 AND created_at >= $2 AND created_at < $3 AND cardinality(settled_attempts) > 0
      GROUP BY 1 ORDER BY 1 NULLS LAST`,
    [q.agentId, q.from, q.to],
  );
  return rows.map((r) => ({
    key: r.key,
    calls: Number(r.calls),
    inputTokens: Number(r.input),
    outputTokens: Number(r.output),
    cacheReadTokens: Number(r.cache_read),
    cacheWriteTokens: Number(r.cache_write),
    costUsd: Number(r.cost),
  }));
}
