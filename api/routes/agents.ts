import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { ensureAgent, getAgent, lockAgent, upsertAgent, type AgentRow } from '../../db/agents';
import { recordAudit } from '../../db/audit';
import { inTransaction, type Pool } from '../../db/pool';
import { destinationChange } from '../../domain/audit';
import type { EgressAllow } from '../../domain/egress';
import { tellBudgetsChanged } from '../../services/budgets';
import { failingRuns } from '../../services/workflow-task-failures';
import { assertAgentAccess } from '../auth';
import { assertReachable } from '../egress-check';
import { notFound } from '../errors';
import { Agent, AgentBody, AgentParams, ErrorResponse, FailingRuns } from '../schemas';

const view = (a: AgentRow) => ({
  agentId: a.id,
  name: a.name,
  model: a.model,
  systemPrompt: a.systemPrompt,
  owner: a.ownerDelivery ? { delivery: a.ownerDelivery } : null,
  destinations: a.destinations,
  reflection: { enabled: a.reflectionEnabled },
  budgets: a.budgets,
  createdAt: a.createdAt,
  updatedAt: a.updatedAt,
});

export function agentRoutes(pool: Pool, temporal: Client, egressAllow: EgressAllow): FastifyPluginAsyncZod {
  return async (app) => {
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
        assertAgentAccess(req, agentId);
        const destinations = Object.entries(req.body.destinations ?? {}).map(
          ([name, d]) => [`destinations.${name}`, d] as const,
        );
        assertReachable([['owner.delivery', req.body.owner?.delivery], ...destinations], egressAllow);
        const saved = await inTransaction(pool, async (db) => {
          // Locked (created with defaults if new) so that concurrent edits each compare against what they replace.
          await lockAgent(db, agentId);
          const before = (await getAgent(db, agentId))!;
          const after = await upsertAgent(db, agentId, req.body);
          const at = (a: AgentRow) => ({ owner: a.ownerDelivery, destinations: a.destinations });
          const change = destinationChange(at(before), at(after));
          if (change)
            await recordAudit(db, {
              agentId,
              action: 'agent.destinations',
              actor: req.actor,
              subject: agentId,
              detail: change,
            });
          return view(after);
        });
        // Delegates waiting for a budget go on once the budgets change (they wait again if still not allowed).
        await tellBudgetsChanged(pool, temporal, agentId);
        return saved;
      },
    );

    app.get(
      '/v1/agents/:agentId',
      {
        schema: {
          tags: ['agents'],
          summary: 'An agent (created with defaults on first use)',
          params: AgentParams,
          response: { 200: Agent, 404: ErrorResponse },
        },
      },
      async (req) => {
        assertAgentAccess(req, req.params.agentId);
        await ensureAgent(pool, req.params.agentId);
        const agent = await getAgent(pool, req.params.agentId);
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
        assertAgentAccess(req, req.params.agentId);
        return { runs: await failingRuns(pool, temporal, req.params.agentId) };
      },
    );
  };
}
