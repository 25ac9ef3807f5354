import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { AUDIT_ACTIONS } from '../../domain/audit';
import { listAudit } from '../../services/audit';
import { AgentParams, wholeNumber } from '../schemas';

const AuditEntry = z.object({
  id: z.number().describe('Increasing; pass the last one seen as `before` for the next page'),
  at: z.string(),
  action: z.string().describe(
    `An open set (new kinds are added over time). Today: ${Object.entries(AUDIT_ACTIONS)
      .map(([action, meaning]) => `\`${action}\`: ${meaning}`)
      .join('; ')}.`,
  ),
  actor: z.string().describe("`token:<first 12 hex digits of the token's SHA-256>`, or `dev` without tokens"),
  subject: z.string(),
  detail: z.unknown().nullable(),
});
const AuditQuery = z
  .object({
    limit: wholeNumber(1, 200).default(50),
    before: wholeNumber(1, Number.MAX_SAFE_INTEGER).optional(),
  })
  .strict();

export function auditRoutes(pool: Pool): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/audit',
      {
        schema: {
          tags: ['audit'],
          summary:
            "The agent's audit trail, newest first: who (which token) approved, rejected, rolled back or changed " +
            'a destination, and when',
          params: AgentParams,
          querystring: AuditQuery,
          response: {
            200: z.object({
              entries: z.array(AuditEntry),
              nextBefore: z.number().nullable().describe('`before` for the next (older) page; null on the last'),
            }),
          },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        const { limit, before } = req.query;
        // One more than asked: whether an older page exists, without a second query.
        const rows = await listAudit(pool, agentId, { limit: limit + 1, ...(before ? { before } : {}) });
        const entries = rows.slice(0, limit);
        return { entries, nextBefore: rows.length > limit ? entries[entries.length - 1]!.id : null };
      },
    );
  };
}
