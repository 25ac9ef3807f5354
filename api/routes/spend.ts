import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { BUDGET_NAMES, startOfMonth, type BudgetName } from '../../domain/spend';
import { instantOf } from '../../domain/text';
import { budgetStanding, usage, USAGE_GROUPS } from '../../services/spend';
import { AgentParams, dateTime, ErrorResponse } from '../schemas';

const UsageQuery = z
  .object({
    from: dateTime().optional().describe('Inclusive; the start of this month (UTC) by default'),
    to: dateTime().optional().describe('Exclusive; now by default'),
    groupBy: z.enum(USAGE_GROUPS).default('day'),
  })
  .strict();

const Tokens = {
  calls: z.number().describe('Model calls that answered (a retried call that reached the model again counts again)'),
  inputTokens: z.number(),
  outputTokens: z.number(),
  cacheReadTokens: z.number(),
  cacheWriteTokens: z.number(),
  costUsd: z.number(),
};
const UsageResponse = z.object({
  from: z.string(),
  to: z.string(),
  groupBy: z.enum(USAGE_GROUPS),
  total: z.object(Tokens),
  groups: z.array(
    z.object({
      key: z
        .string()
        .nullable()
        .describe('The day, conversation key, job id, routine run id, delegate id or model; null for calls of none'),
      ...Tokens,
    }),
  ),
});

const BudgetView = z.object({
  name: z.enum(BUDGET_NAMES),
  limitUsd: z.number(),
  /** Only for the agent's calendar budgets; a per-turn, per-tree or per-run budget counts each one separately. */
  spentUsd: z.number().optional(),
  reservedUsd: z.number().optional(),
  leftUsd: z.number().optional(),
  counts: z.string().describe('What the budget counts: "today (UTC)", "this month (UTC)", "each turn", …'),
});

const COUNTS: Record<BudgetName, string> = {
  dailyUsd: 'today (UTC)',
  monthlyUsd: 'this month (UTC)',
  perTurnUsd: 'each turn',
  perDelegateTreeUsd: 'each delegate',
  perJobRunUsd: 'each job run',
  perRoutineRunUsd: 'each routine run',
};

/** What an agent's model calls spent, and where its budgets stand. */
export function spendRoutes(pool: Pool): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/usage',
      {
        schema: {
          tags: ['spend'],
          summary: "The agent's model usage and cost, grouped (settled calls only)",
          params: AgentParams,
          querystring: UsageQuery,
          response: { 200: UsageResponse, 400: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        // The schema gave each in UTC, as PostgreSQL reads it (a year before 1 with BC, which Date cannot read).
        const to = req.query.to === undefined ? new Date() : instantOf(req.query.to)!;
        const from = req.query.from === undefined ? startOfMonth(to) : instantOf(req.query.from)!;
        // A range that ends before it starts holds no calls: an empty answer, not an error.
        const groups = await usage(pool, { agentId, from, to, groupBy: req.query.groupBy });
        const total = {
          calls: 0,
          inputTokens: 0,
          outputTokens: 0,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          costUsd: 0,
        };
        for (const g of groups) for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += g[k];
        return { from: from.toISOString(), to: to.toISOString(), groupBy: req.query.groupBy, total, groups };
      },
    );

    app.get(
      '/v1/agents/:agentId/budgets',
      {
        schema: {
          tags: ['spend'],
          summary: "The agent's budgets, with what is spent, reserved and left of the calendar ones",
          params: AgentParams,
          response: { 200: z.object({ budgets: z.array(BudgetView) }) },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        const budgets = await budgetStanding(pool, agentId);
        return {
          budgets: budgets.map(({ name, limitUsd, ...standing }) => ({
            name,
            limitUsd,
            counts: COUNTS[name],
            ...standing,
          })),
        };
      },
    );
  };
}
