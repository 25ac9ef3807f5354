import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { decideProposal, reflectionState } from '../../contracts/reflection';
import { lockAgent } from '../../db/agents';
import { recordAudit } from '../../db/audit';
import { currentMemory, listVersions, memoryVersion, writeVersion } from '../../db/memory';
import { inTransaction, type Pool } from '../../db/pool';
import { gateLog, getProposal, listPoisoned, listProposals, spentToday, type ProposalRow } from '../../db/proposals';
import { reflectionWorkflowId } from '../../domain/ids';
import { storableString } from '../../domain/text';
import { assertAgentAccess } from '../auth';
import { sendDecision } from '../decisions';
import { ApiError, notFound } from '../errors';
import { AgentParams, ErrorResponse, wholeNumber } from '../schemas';

const Files = z.record(z.string(), z.string());
export const Change = z.object({
  file: z.string(),
  action: z.string(),
  summary: z.string(),
  rationale: z.string(),
  conversationIds: z.array(z.string()),
});
const VersionMeta = z.object({
  version: z.number(),
  kind: z.enum(['initial', 'proposal', 'rollback']),
  proposalId: z.string().nullable(),
  changes: z.array(Change),
  learnedFrom: z.array(z.string()),
  rollbackOf: z.number().nullable(),
  createdAt: z.string(),
});
const Memory = z.object({ version: z.number(), files: Files });
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
const VersionParams = AgentParams.extend({ version: wholeNumber(1, 2_147_483_647) });
const errors = { 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse, 503: ErrorResponse };

/** The route of a person's decision on a proposal waiting for approval (the approvals list hands out its path). */
export const proposalDecisionRoute = (verdict: 'approve' | 'reject') =>
  `/v1/agents/:agentId/proposals/:id/${verdict}` as const;

const proposalView = ({ agentId: _a, workflowId: _w, version, ...p }: ProposalRow) => ({
  ...p,
  ...(version === null ? {} : { version }),
});

export function memoryRoutes(deps: {
  pool: Pool;
  temporal: Client;
  temporalDeadlineMs: number;
}): FastifyPluginAsyncZod {
  const { pool, temporal } = deps;
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/memory',
      {
        schema: {
          tags: ['memory'],
          summary: "The agent's current memory: every file of the current version",
          params: AgentParams,
          response: { 200: Memory },
        },
      },
      async (req) => {
        assertAgentAccess(req, req.params.agentId);
        const m = await currentMemory(pool, req.params.agentId);
        return { version: m.version, files: m.files };
      },
    );

    app.get(
      '/v1/agents/:agentId/memory/versions',
      {
        schema: {
          tags: ['memory'],
          summary: 'Every memory version, with what changed and what it learned from',
          params: AgentParams,
          response: { 200: z.array(VersionMeta) },
        },
      },
      async (req) => {
        assertAgentAccess(req, req.params.agentId);
        return listVersions(pool, req.params.agentId);
      },
    );

    app.get(
      '/v1/agents/:agentId/memory/versions/:version',
      {
        schema: {
          tags: ['memory'],
          summary: 'One memory version, with its full content',
          params: VersionParams,
          response: { 200: VersionMeta.extend({ files: Files }), 404: ErrorResponse },
        },
      },
      async (req) => {
        assertAgentAccess(req, req.params.agentId);
        const v = await memoryVersion(pool, req.params.agentId, req.params.version);
        if (!v) throw notFound(`memory version ${req.params.version}`);
        return v;
      },
    );

    app.post(
      '/v1/agents/:agentId/memory/rollback',
      {
        schema: {
          tags: ['memory'],
          summary: 'Roll back: a new version equal to an earlier one (every version stays readable)',
          params: AgentParams,
          body: z.object({ toVersion: z.number().int().positive().max(2_147_483_647) }).strict(),
          response: { 200: Memory.extend({ rollbackOf: z.number() }), ...errors },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        assertAgentAccess(req, agentId);
        return inTransaction(pool, async (db) => {
          await lockAgent(db, agentId);
          await currentMemory(db, agentId); // version 1 exists from first use, also when this is the first
          const target = await memoryVersion(db, agentId, req.body.toVersion);
          if (!target) throw notFound(`memory version ${req.body.toVersion}`);
          const v = await writeVersion(db, agentId, {
            files: target.files,
            kind: 'rollback',
            rollbackOf: target.version,
          });
          await recordAudit(db, {
            agentId,
            action: 'memory.rollback',
            actor: req.actor,
            subject: String(v.version),
            detail: { toVersion: target.version },
          });
          return { version: v.version, files: v.files, rollbackOf: target.version };
        });
      },
    );

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
        assertAgentAccess(req, req.params.agentId);
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
          assertAgentAccess(req, agentId);
          const p = await getProposal(pool, id);
          if (!p || p.agentId !== agentId) throw notFound(`proposal ${id}`);
          if (p.status !== 'awaiting_approval')
            throw new ApiError(409, 'not_awaiting_approval', `proposal ${id} is ${p.status}, not waiting for approval`);
          const decision = {
            proposalId: id,
            approved: verdict === 'approve',
            ...(req.body?.note ? { note: req.body.note } : {}),
          };
          await sendDecision(
            temporal,
            deps.temporalDeadlineMs,
            () => temporal.workflow.getHandle(p.workflowId).executeUpdate(decideProposal, { args: [decision] }),
            `proposal ${id} is not waiting for approval`,
            {
              pool,
              entry: {
                agentId,
                action: verdict === 'approve' ? 'proposal.approve' : 'proposal.reject',
                actor: req.actor,
                subject: id,
                detail: decision.note ? { note: decision.note } : undefined,
              },
            },
          );
          return proposalView((await getProposal(pool, id))!);
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
        assertAgentAccess(req, agentId);
        const live = await temporal.workflow
          .getHandle(reflectionWorkflowId(agentId))
          .query(reflectionState)
          .then((state) => ({ ...state, live: true }))
          // No reflection workflow yet, or Temporal unreachable: the state PostgreSQL holds, marked so.
          .catch(() => ({ queued: [], draining: false, awaiting: null, drains: 0, lastDrain: null, live: false }));
        return {
          ...live,
          poisoned: await listPoisoned(pool, agentId),
          gateLog: await gateLog(pool, agentId),
          spentTodayUsd: await spentToday(pool, agentId),
        };
      },
    );
  };
}
