import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { storableString } from '../../domain/text';
import { decideOnProposal, listProposals, reflectionOverview, type ProposalRow } from '../../services/proposals';
import { decisionNotTaken, type DecisionRouteDeps } from '../decisions';
import { ApiError, notFound } from '../errors';
import { AgentParams, ErrorResponse } from '../schemas';

export const Check = z.object({
  name: z.string(),
  kind: z.enum(['hard', 'soft']),
  passed: z.boolean(),
  detail: z.string().optional(),
});
const Proposal = z.object({
  id: z.string(),
  status: z.enum(['skipped', 'admitted', 'rejected', 'awaiting_approval', 'poisoned']),
  checks: z.array(Check),
  version: z.number().optional(),
  baseVersion: z.number(),
  tier: z.string().nullable(),
  conversationIds: z.array(z.string()),
  answer: z.unknown(),
  decision: z.object({ approved: z.boolean(), note: z.string().optional() }).nullable(),
  createdAt: z.string(),
  decidedAt: z.string().nullable(),
});
const ProposalParams = AgentParams.extend({ id: z.string().uuid() });
const errors = { 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse, 503: ErrorResponse };

/** The route of a person's decision on a proposal waiting for approval (the approvals list hands out its path). */
export const proposalDecisionRoute = (verdict: 'approve' | 'reject') =>
  `/v1/agents/:agentId/proposals/:id/${verdict}` as const;

const proposalView = ({ agentId: _a, workflowId: _w, version, ...p }: ProposalRow) => ({
  ...p,
  ...(version === null ? {} : { version }),
});

/** Reflection: an agent's proposals, a person's decision on one waiting for approval, and reflection's state. */
export function proposalRoutes(deps: DecisionRouteDeps): FastifyPluginAsyncZod {
  const { pool, temporal } = deps;
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/proposals',
      {
        schema: {
          tags: ['reflection'],
          summary:
            'Reflection proposals, newest first, with the result of every check (drains that skipped with ?all=true)',
          params: AgentParams,
          querystring: z.object({ all: z.enum(['true', 'false']).default('false') }),
          response: { 200: z.array(Proposal) },
        },
      },
      async (req) => {
        const all = (await listProposals(pool, req.params.agentId)).map(proposalView);
        return req.query.all === 'true' ? all : all.filter((p) => p.status !== 'skipped');
      },
    );

    for (const verdict of ['approve', 'reject'] as const) {
      app.post(
        proposalDecisionRoute(verdict),
        {
          schema: {
            tags: ['reflection'],
            summary:
              verdict === 'approve'
                ? 'Approve a proposal waiting for approval: it is checked again and applied'
                : 'Reject a proposal waiting for approval: nothing changes',
            params: ProposalParams,
            body: z
              .object({ note: storableString().max(2000).optional() })
              .strict()
              .nullish(),
            response: { 200: Proposal, ...errors },
          },
        },
        async (req) => {
          const { agentId, id } = req.params;
          const decided = await decideOnProposal(pool, temporal, deps.temporalDeadlineMs, {
            agentId,
            proposalId: id,
            approved: verdict === 'approve',
            note: req.body?.note,
            actor: req.actor,
          });
          if (decided.ok) return proposalView(decided.proposal);
          switch (decided.why) {
            case 'not_found':
              throw notFound(`proposal ${id}`);
            case 'not_awaiting_approval':
              throw new ApiError(
                409,
                'not_awaiting_approval',
                `proposal ${id} is ${decided.status}, not waiting for approval`,
              );
            default:
              throw decisionNotTaken(decided.why, `proposal ${id} is not waiting for approval`);
          }
        },
      );
    }

    app.get(
      '/v1/agents/:agentId/reflection',
      {
        schema: {
          tags: ['reflection'],
          summary: "Reflection's state: the queue, the poison list, the gate's decisions and today's spending",
          params: AgentParams,
          response: {
            200: z.object({
              queued: z.array(z.unknown()),
              draining: z.boolean(),
              awaiting: z.string().nullable(),
              drains: z.number(),
              /** false: the workflow could not be asked (none yet, or Temporal unreachable); queued and drains are
               * then empty. */
              live: z.boolean(),
              lastDrain: z.unknown().nullable(),
              poisoned: z.array(z.unknown()),
              gateLog: z.array(z.unknown()),
              spentTodayUsd: z.number(),
            }),
          },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        return reflectionOverview(pool, temporal, agentId);
      },
    );
  };
}
