import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { deletionStatus, requestDeletion } from '../../services/deletion';
import { notFound } from '../errors';
import { AgentParams, ConversationParams, ErrorResponse } from '../schemas';

const Deletion = z.object({
  deletionId: z.string(),
  agentId: z.string(),
  conversationId: z.string().nullable().describe('The conversation deleted; null when the whole agent is'),
  status: z.enum(['running', 'finished', 'failed']),
  outcome: z
    .object({
      conversations: z.number(),
      workflowsEnded: z.number(),
      schedulesDeleted: z.number(),
      rowsErased: z
        .number()
        .optional()
        .describe('Rows erased from PostgreSQL (a ledger entry emptied of its request counts); absent for one before'),
    })
    .nullable()
    .describe('What the deletion did, once finished: counts, never content'),
});
const DeletionParams = AgentParams.extend({ deletionId: z.uuid() });
const POLL =
  'Answers 202 with the deletion, whose status GET /v1/agents/{agentId}/deletions/{deletionId} tells; asked again ' +
  "while it runs (or while the agent's runs), the same one. Until it has finished, every write to what it deletes " +
  'answers 409 being_deleted, naming it. ';

/** Deleting a conversation or an agent: a workflow does it (services/deletion.ts); the API starts and reports it. */
export function deletionRoutes(deps: { pool: Pool; temporal: Client; taskQueue: string }): FastifyPluginAsyncZod {
  const { pool, temporal, taskQueue } = deps;
  return async (app) => {
    app.delete(
      '/v1/agents/:agentId/conversations/:conversationId',
      {
        schema: {
          tags: ['conversations'],
          summary: 'Delete a conversation: its workflow ends, its transcript, messages, results and text are erased',
          description:
            POLL +
            'Its delegates and their waiting approvals are cancelled, naming the deletion. The effects ledger keeps ' +
            'its keys, so a late retry cannot send again; the audit trail records who deleted it and when.',
          params: ConversationParams,
          response: { 202: Deletion, 404: ErrorResponse },
        },
      },
      async (req, reply) => {
        const { agentId, conversationId } = req.params;
        const started = await requestDeletion(pool, temporal, taskQueue, { agentId, conversationId, actor: req.actor });
        if (!started) throw notFound(`conversation ${conversationId}`);
        return reply.status(202).send(started);
      },
    );

    app.delete(
      '/v1/agents/:agentId',
      {
        schema: {
          tags: ['agents'],
          summary: 'Delete an agent and everything it owns',
          description:
            POLL +
            'Its Schedules, conversations, delegates, jobs, routines, apps, memory versions, tool servers, budgets ' +
            'and secrets are removed, and its open workflows end; its audit trail and effects ledger keys remain.',
          params: AgentParams,
          response: { 202: Deletion, 404: ErrorResponse },
        },
      },
      async (req, reply) => {
        const { agentId } = req.params;
        const started = await requestDeletion(pool, temporal, taskQueue, { agentId, actor: req.actor });
        if (!started) throw notFound(`agent ${agentId}`);
        return reply.status(202).send(started);
      },
    );

    app.get(
      '/v1/agents/:agentId/deletions/:deletionId',
      {
        schema: {
          tags: ['agents'],
          summary: 'A deletion of the agent or one of its conversations, and how it goes',
          params: DeletionParams,
          response: { 200: Deletion, 404: ErrorResponse },
        },
      },
      async (req) => {
        const found = await deletionStatus(temporal, req.params.agentId, req.params.deletionId);
        if (!found) throw notFound(`deletion ${req.params.deletionId}`);
        return found;
      },
    );
  };
}
