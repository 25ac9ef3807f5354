import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { eventsAfter, type ConversationEvent } from '../../db/events';
import type { Pool } from '../../db/pool';
import { conversationWorkflowId } from '../../domain/ids';
import { assertAgentAccess } from '../auth';
import type { EventHub } from '../events';
import { ConversationParams, ErrorResponse } from '../schemas';

const KEEP_ALIVE_MS = 15_000;

/**
 * GET …/events: Server-Sent Events of a conversation. Finished events (turn.started, tool.called, reply.delivered,
 * turn.finished, delegate.finished) carry ids and are kept, so a reconnect with Last-Event-ID resumes without gaps;
 * text.delta events stream live while the model writes, without ids.
 */
export function eventRoutes(deps: { pool: Pool; hub: EventHub }): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/conversations/:conversationId/events',
      {
        schema: {
          tags: ['conversations'],
          summary: 'Live events of a conversation (text/event-stream); Last-Event-ID (header, or lastEventId) resumes',
          params: ConversationParams,
          querystring: z.object({ lastEventId: z.coerce.number().int().min(0).optional() }),
          headers: z.object({ 'last-event-id': z.string().regex(/^\d{1,18}$/, 'an event id').optional() }).passthrough(),
          response: { 200: z.string().describe('text/event-stream'), 401: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req, reply) => {
        const { agentId, conversationId } = req.params;
        assertAgentAccess(req, agentId);
        const key = conversationWorkflowId(agentId, conversationId);
        let sent = Number(req.headers['last-event-id'] ?? req.query.lastEventId ?? 0);
        let replaying = true;
        const held: ConversationEvent[] = [];
        const res = reply.raw;
        const write = (e: ConversationEvent) => {
          if (e.id !== undefined) {
            if (e.id <= sent) return; // already sent (replayed, then announced live)
            sent = e.id;
          }
          res.write(`${e.id !== undefined ? `id: ${e.id}\n` : ''}event: ${e.type}\ndata: ${JSON.stringify(e.data)}\n\n`);
        };
        // Listen first, then replay what is kept: nothing falls between the two.
        const unsubscribe = await deps.hub.subscribe(key, (e) => (replaying ? held.push(e) : write(e)));
        reply.hijack();
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
        // Sent now, not with the first event: the client knows it is subscribed before anything happens.
        res.flushHeaders();
        try {
          for (let batch = await eventsAfter(deps.pool, key, sent); batch.length; batch = await eventsAfter(deps.pool, key, sent)) batch.forEach(write);
        } finally {
          replaying = false;
          held.splice(0).forEach(write);
        }
        const ping = setInterval(() => res.write(': keep-alive\n\n'), KEEP_ALIVE_MS);
        req.raw.once('close', () => {
          clearInterval(ping);
          unsubscribe();
        });
      },
    );
  };
}
