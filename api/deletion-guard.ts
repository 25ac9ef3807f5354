import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Pool } from '../db/pool';
import { holdForWrite, runningDeletionOf, WriteHolds, type RunningDeletion } from '../services/deletion';
import { ApiError } from './errors';
import { ErrorResponse } from './schemas';

/** The routes of one agent, all guarded while it (or the conversation they are under) is being deleted. */
const AGENT_ROUTE = '/v1/agents/:agentId';
/**
 * What a deletion never refuses: the deletions themselves (asked again while one runs, they answer it) and how one
 * goes.
 */
const UNGUARDED = new Set([
  `DELETE ${AGENT_ROUTE}`,
  `DELETE ${AGENT_ROUTE}/conversations/:conversationId`,
  `GET ${AGENT_ROUTE}/deletions/:deletionId`,
  `HEAD ${AGENT_ROUTE}/deletions/:deletionId`,
]);
const READS = new Set(['GET', 'HEAD']);

const whatOf = (d: RunningDeletion) =>
  d.conversationId === null ? `agent ${d.agentId}` : `conversation ${d.conversationId}`;
const detailsOf = (d: RunningDeletion) => ({
  deletionId: d.deletionId,
  agentId: d.agentId,
  conversationId: d.conversationId,
});
const statusOf = (d: RunningDeletion) => `GET ${AGENT_ROUTE.replace(':agentId', d.agentId)}/deletions/${d.deletionId}`;

/** 409 being_deleted: a write refused, naming the deletion. */
export function beingDeleted(d: RunningDeletion): ApiError {
  const message =
    `${whatOf(d)} is being deleted (deletion ${d.deletionId}); ` +
    `it takes writes again once the deletion has finished (${statusOf(d)})`;
  return new ApiError(409, 'being_deleted', message, detailsOf(d));
}

/** 404 not_found: a read of what is being deleted, naming the deletion. */
export function goneWhileDeleted(d: RunningDeletion): ApiError {
  const message = `${whatOf(d)} not found: it is being deleted (deletion ${d.deletionId}; ${statusOf(d)})`;
  return new ApiError(404, 'not_found', message, detailsOf(d));
}

/**
 * While an agent's or a conversation's deletion runs, what it deletes is gone from the API: each route under
 * /v1/agents/:agentId (or under the conversation), a route added later too, is guarded here and nowhere else. A write
 * answers 409 being_deleted and a read 404, each naming the deletion; the deletions themselves and their status answer.
 *
 * The check leaves no window a write can slip through: a write holds its agent's (and conversation's) lock from
 * before it asks for a deletion until its handler is done, and the deletion, marked before it starts, takes that lock
 * before it ends or erases anything (services/deletion.ts; docs/design.md, "Deleting").
 */
export function registerDeletionGuard(app: FastifyInstance, pool: Pool): void {
  const holds = new WriteHolds(pool.options);
  app.addHook('onClose', () => holds.close());
  app.addHook('onRoute', (route) => {
    const url = route.url ?? route.path;
    if (url !== AGENT_ROUTE && !url.startsWith(`${AGENT_ROUTE}/`)) return;
    const guarded = [route.method].flat().filter((m) => !UNGUARDED.has(`${m} ${url}`));
    if (!guarded.length) return;
    if (guarded.some((m) => !READS.has(m)) && route.schema && !route.schema.hide)
      route.schema.response = { 409: ErrorResponse, ...(route.schema.response as Record<number, unknown> | undefined) };
    const handler = route.handler;
    route.handler = async function guardedHandler(this: FastifyInstance, req: FastifyRequest, reply: FastifyReply) {
      if (UNGUARDED.has(`${req.method} ${url}`)) return handler.call(this, req, reply);
      const { agentId, conversationId } = req.params as { agentId: string; conversationId?: string };
      if (READS.has(req.method)) {
        const deletion = await runningDeletionOf(pool, agentId, conversationId);
        if (deletion) throw goneWhileDeleted(deletion);
        return handler.call(this, req, reply);
      }
      const held = await holdForWrite(holds, pool, agentId, conversationId);
      if ('deletion' in held) {
        if (held.deletion) throw beingDeleted(held.deletion);
        // Another deletion's lock, whose name hashes as this agent's does: it is over in a moment.
        throw new ApiError(503, 'unavailable', `agent ${agentId}'s writes wait for another deletion; try again`);
      }
      try {
        return await handler.call(this, req, reply);
      } finally {
        await held.release();
      }
    };
  });
}
