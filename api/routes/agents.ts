import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { ensureAgent, getAgent, upsertAgent, type AgentRow } from '../../db/agents';
import type { Pool } from '../../db/pool';
import { assertAgentAccess } from '../auth';
import { notFound } from '../errors';
import { Agent, AgentBody, AgentParams, ErrorResponse } from '../schemas';

const view = (a: AgentRow) => ({
  agentId: a.id,
  name: a.name,
  model: a.model,
  systemPrompt: a.systemPrompt,
  owner: a.ownerDelivery ? { delivery: a.ownerDelivery } : null,
  reflection: { enabled: a.reflectionEnabled },
  createdAt: a.createdAt,
  updatedAt: a.updatedAt,
});

export function agentRoutes(pool: Pool): FastifyPluginAsyncZod {
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
        assertAgentAccess(req, req.params.agentId);
        return view(await upsertAgent(pool, req.params.agentId, req.body));
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
  };
}
