import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { currentMemory, listVersions, memoryVersion, rollBackMemory } from '../../services/memory';
import { notFound } from '../errors';
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
const VersionParams = AgentParams.extend({ version: wholeNumber(1, 2_147_483_647) });
const errors = { 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse, 503: ErrorResponse };

/** An agent's memory: its current version, every version, and rolling back to one. */
export function memoryRoutes(pool: Pool): FastifyPluginAsyncZod {
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
        const rolledBack = await rollBackMemory(pool, agentId, req.body.toVersion, req.actor);
        if (!rolledBack) throw notFound(`memory version ${req.body.toVersion}`);
        return rolledBack;
      },
    );
  };
}
