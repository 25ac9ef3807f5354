import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Pool } from '../../db/pool';
import type { EgressAllow } from '../../domain/egress';
import { z } from 'zod';
import { agentOf, configureAgent, listAgents, type AgentRow } from '../../services/agents';
import { storableString } from '../../domain/text';
import { CursorText, decodeCursor, Page, PageQuery, pageOf } from '../pagination';
import { failingRuns } from '../../services/workflow-task-failures';
import { shownDelivery, shownDestinations } from '../delivery-shown';
import { assertReachable } from '../egress-check';
import { notFound } from '../errors';
import { Agent, AgentBody, AgentParams, ErrorResponse, FailingRuns } from '../schemas';

const view = (a: AgentRow) => ({
  agentId: a.id,
  name: a.name,
  model: a.model,
  systemPrompt: a.systemPrompt,
  owner: a.ownerDelivery ? { delivery: shownDelivery(a.ownerDelivery) } : null,
  destinations: shownDestinations(a.destinations),
  reflection: { enabled: a.reflectionEnabled },
  budgets: a.budgets,
  createdAt: a.createdAt,
  updatedAt: a.updatedAt,
});

const AgentListQuery = PageQuery.extend({
  q: storableString().max(200).optional().describe('Only agents whose id or name contains this, ignoring case'),
}).strict();
const AgentItem = z.object({
  agentId: z.string(),
  name: z.string(),
  model: z.string().nullable(),
  conversations: z.number(),
  jobs: z.number(),
  routines: z.number(),
  waitingApprovals: z.number().describe('Routine runs, proposals and tool calls waiting for a decision'),
  lastActivityAt: z.string().describe("The latest of the agent's change and its conversations' turns"),
});

export function agentRoutes(pool: Pool, temporal: Client, egressAllow: EgressAllow): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v1/agents',
      {
        schema: {
          tags: ['agents'],
          summary: 'The agents, by id: every one for an operator, its own for an agent’s token',
          querystring: AgentListQuery,
          response: { 200: Page(AgentItem), 400: ErrorResponse },
        },
      },
      async (req) => {
        const { q, limit } = req.query;
        const after = decodeCursor(req.query.cursor, CursorText);
        const rows = await listAgents(
          pool,
          { scope: req.agentScope, ...(q ? { q } : {}) },
          { ...(after ? { after } : {}), limit: limit + 1 },
        );
        return pageOf(
          rows,
          limit,
          (a) => a.agentId,
          (a) => a,
        );
      },
    );

    app.put(
      '/v1/agents/:agentId',
      {
        schema: {
          tags: ['agents'],
          summary: 'Create or configure an agent',
          params: AgentParams,
          body: AgentBody,
          response: { 200: Agent, 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        const destinations = Object.entries(req.body.destinations ?? {}).map(
          ([name, d]) => [`destinations.${name}`, d] as const,
        );
        assertReachable([['owner.delivery', req.body.owner?.delivery], ...destinations], egressAllow);
        return view(await configureAgent(pool, temporal, agentId, req.body, req.actor));
      },
    );

    app.get(
      '/v1/agents/:agentId',
      {
        schema: {
          tags: ['agents'],
          summary: 'An agent; 404 until it is first used (a PUT, a message, any write), and from its deletion on',
          params: AgentParams,
          response: { 200: Agent, 404: ErrorResponse },
        },
      },
      async (req) => {
        const agent = await agentOf(pool, req.params.agentId);
        if (!agent) throw notFound(`agent ${req.params.agentId}`);
        return view(agent);
      },
    );

    app.get(
      '/v1/agents/:agentId/failing-runs',
      {
        schema: {
          tags: ['agents'],
          summary: "The agent's workflow runs whose workflow task keeps failing (a nondeterminism error, or any error)",
          description:
            'Runs whose workflow task failed and failed again on retry (Temporal is at its third attempt or later), ' +
            'the latest failure first. Such a run makes no progress until it is reset (docs/operators.md); the ' +
            'console shows a warning for each.',
          params: AgentParams,
          response: { 200: FailingRuns, 403: ErrorResponse },
        },
      },
      async (req) => {
        return { runs: await failingRuns(pool, temporal, req.params.agentId) };
      },
    );
  };
}
