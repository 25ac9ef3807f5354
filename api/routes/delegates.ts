import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { OUTCOME_KINDS } from '../../domain/delegation';
import { storableString } from '../../domain/text';
import { cancelDelegate, getDelegate, listDelegates } from '../../services/delegates';
import { ApiError, notFound } from '../errors';
import { CursorInstant, CursorText, decodeCursor, Page, PageQuery, pageOf } from '../pagination';
import { AgentParams, ErrorResponse, Id } from '../schemas';

const DelegateParams = z.object({ agentId: Id, delegateId: z.string().regex(/^[A-Za-z0-9-]{1,64}$/) });
const Delegate = z.object({
  delegateId: z.string(),
  conversationId: z.string(),
  taskNumber: z.number().optional(),
  lifecycle: z.string(),
  outcome: z
    .object({
      kind: z.enum(OUTCOME_KINDS),
      result: z.string(),
      outcomeVersion: z.number(),
      transcriptVersion: z.number(),
      terminalOwner: z.string(),
    })
    .optional(),
  admittedAt: z.string().optional(),
  relay: z.string().optional(),
  budgetBlocked: z
    .string()
    .optional()
    .describe('Waiting for this budget to be raised (PUT the agent with a higher one); it goes on from there'),
  admissions: z.array(z.object({ outcomeVersion: z.number(), decision: z.string(), via: z.string(), at: z.string() })),
});

const DelegateListQuery = PageQuery.extend({
  status: z
    .enum(['live', 'completed', ...OUTCOME_KINDS])
    .optional()
    .describe('live (not completed), completed, or the outcome kind it ended with'),
}).strict();
/** A delegate list's sort key: its creation (to the microsecond) and its id. */
const DelegateCursor = z.tuple([CursorInstant, CursorText]);

/** An agent's delegates: listed, read one at a time, and cancelled by a person. */
export function delegateRoutes(deps: { pool: Pool; temporal: Client }): FastifyPluginAsyncZod {
  const { pool, temporal } = deps;
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/delegates',
      {
        schema: {
          tags: ['delegates'],
          summary: "The agent's delegates, newest first, each as GET …/delegates/:delegateId shows it",
          params: AgentParams,
          querystring: DelegateListQuery,
          response: { 200: Page(Delegate), 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        const { status, limit } = req.query;
        const after = decodeCursor(req.query.cursor, DelegateCursor);
        const rows = await listDelegates(
          pool,
          agentId,
          { ...(status ? { status } : {}) },
          { ...(after ? { after: { at: after[0], delegateId: after[1] } } : {}), limit: limit + 1 },
        );
        return pageOf(
          rows,
          limit,
          (d) => [d.sortAt, d.delegateId],
          ({ sortAt: _sortAt, ...d }) => d,
        );
      },
    );

    app.get(
      '/v1/agents/:agentId/delegates/:delegateId',
      {
        schema: {
          tags: ['delegates'],
          summary: 'A delegate, its committed outcome and admission',
          params: DelegateParams,
          response: { 200: Delegate, 404: ErrorResponse },
        },
      },
      async (req) => {
        const d = await getDelegate(pool, req.params.agentId, req.params.delegateId);
        if (!d) throw notFound(`delegate ${req.params.delegateId}`);
        return d;
      },
    );

    app.post(
      '/v1/agents/:agentId/delegates/:delegateId/cancel',
      {
        schema: {
          tags: ['delegates'],
          summary: 'Cancel a running delegate; the reason is kept in its outcome',
          params: DelegateParams,
          body: z.object({ reason: storableString().min(1).max(1000) }).strict(),
          response: {
            202: z.object({ delegateId: z.string(), status: z.literal('cancelling') }),
            404: ErrorResponse,
            409: ErrorResponse,
          },
        },
      },
      async (req, reply) => {
        const { agentId, delegateId } = req.params;
        const cancelled = await cancelDelegate(pool, temporal, agentId, delegateId, req.body.reason);
        if (!cancelled.ok) throw new ApiError(cancelled.error.status, cancelled.error.code, cancelled.error.message);
        return reply.status(202).send({ delegateId: cancelled.value.delegateId, status: 'cancelling' as const });
      },
    );
  };
}
