import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { conversationWorkflowId } from '../../domain/ids';
import { CONVERSATION_EVENT_TYPES, eventsAfter, type ConversationEvent } from '../../services/events';
import type { EventHub } from '../events';
import { ErrorResponse, ReadableConversationParams, wholeNumber } from '../schemas';

const KEEP_ALIVE_MS = 15_000;
/** One event as a client reads it: kept events carry an id, text.delta does not; data is JSON. */
const SseEvent = z.object({
  id: z.string().regex(/^\d+$/).optional(),
  event: z.enum(CONVERSATION_EVENT_TYPES),
  data: z.string(),
});
/** A client this far behind is cut off (it reconnects with Last-Event-ID) rather than buffered without end. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

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
          params: ReadableConversationParams,
          querystring: z.object({
            lastEventId: wholeNumber(0, Number.MAX_SAFE_INTEGER).optional(),
          }),
          headers: z
            .object({
              'last-event-id': z
                .string()
                .regex(/^\d{1,15}$/, 'an event id')
                .optional(),
            })
            .passthrough(),
          response: {
            200: {
              description: 'Server-Sent Events, each with its JSON data',
              content: { 'text/event-stream': { schema: SseEvent } },
            },
            401: ErrorResponse,
            404: ErrorResponse,
          },
        },
      },
      async (req, reply) => {
        const { agentId, conversationId } = req.params;
        const key = conversationWorkflowId(agentId, conversationId);
        const res = reply.raw;
        let sent = Number(req.headers['last-event-id'] ?? req.query.lastEventId ?? 0);
        let closed = false;
        const send = (e: ConversationEvent) => {
          if (closed) return;
          res.write(
            `${e.id !== undefined ? `id: ${e.id}\n` : ''}event: ${e.type}\ndata: ${JSON.stringify(e.data)}\n\n`,
          );
          if (res.writableLength > MAX_BUFFERED_BYTES) end();
        };
        // Kept events go out in id order, one read or send at a time. A NOTIFY that carries its event is sent as it is:
        // a conversation's events commit in the order of their ids (db/events.ts), and NOTIFY arrives in the order of
        // commit. One too large to carry its data, and any before the stream's first read, are read from the table.
        let reading: Promise<void> = Promise.resolve();
        let started = false;
        const sendKept = (e: ConversationEvent) => {
          reading = reading.then(() => {
            if (e.id! <= sent) return;
            sent = e.id!;
            send(e);
          });
        };
        const readKept = () => {
          reading = reading
            .then(async () => {
              for (
                let batch = await eventsAfter(deps.pool, key, sent);
                batch.length && !closed;
                batch = await eventsAfter(deps.pool, key, sent)
              ) {
                for (const e of batch) {
                  sent = e.id!;
                  send(e);
                }
              }
            })
            .catch(() => end());
        };
        let unsubscribe = () => undefined as void;
        const timers: { ping?: NodeJS.Timeout } = {};
        const end = () => {
          if (closed) return;
          closed = true;
          clearInterval(timers.ping);
          unsubscribe();
          res.end();
        };
        // Subscribe before the first read, so nothing committed in between goes unannounced.
        unsubscribe = await deps.hub.subscribe(key, {
          event: (e) => (e.id === undefined ? send(e) : !started || e.data === null ? readKept() : sendKept(e)),
          lost: end,
        });
        reply.hijack();
        res.once('close', end);
        res.writeHead(200, {
          'content-type': 'text/event-stream',
          'cache-control': 'no-cache',
          connection: 'keep-alive',
          'x-accel-buffering': 'no',
        });
        // Sent now, not with the first event: the client knows it is subscribed before anything happens.
        res.flushHeaders();
        timers.ping = setInterval(() => !closed && res.write(': keep-alive\n\n'), KEEP_ALIVE_MS);
        readKept();
        started = true;
      },
    );
  };
}
