import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { TURN_STATUSES, type SubmitResult } from '../../domain/conversation';
import { conversationWorkflowId } from '../../domain/ids';
import { SubmitMessageBody, type InboundMessage } from '../../domain/messages';
import { storableString } from '../../domain/text';
import {
  conversationWithTranscript,
  listConversations,
  waitForTurnEnd,
  type ConversationSummary,
  type FinishedTurn,
} from '../../services/conversation';
import { queryConversationState, submitToConversation } from '../conversation-client';
import { notFound, shuttingDown } from '../errors';
import { TurnEndWake, type EventHub } from '../events';
import { CursorInstant, CursorText, decodeCursor, Page, PageQuery, pageOf } from '../pagination';
import {
  AgentParams,
  ConversationParams,
  ReadableConversationParams,
  ConversationView,
  ErrorResponse,
  SubmitQuery,
  SubmitResponse,
  TranscriptQuery,
} from '../schemas';

/** A waiting submission reads its turn again this long after the last read, in case a NOTIFY was lost. */
const FALLBACK_READ_MS = 5_000;

/** How much of a last turn's message and reply the list shows (characters). */
const PREVIEW_CHARS = 200;

const ConversationListQuery = PageQuery.extend({
  q: storableString().max(200).optional().describe('Only conversations whose id contains this, ignoring case'),
}).strict();
const ConversationItem = z.object({
  conversationId: z.string(),
  /** The conversation's workflow id, which is also its key in PostgreSQL. */
  workflowId: z.string(),
  lastActivityAt: z.string(),
  turns: z.number(),
  lastTurn: z
    .object({
      turnId: z.string(),
      status: z.enum(TURN_STATUSES),
      messageText: z
        .string()
        .describe(
          `The message that started the turn (a retrigger turn's lists delegate results), its first ${PREVIEW_CHARS} ` +
            'characters',
        ),
      replyText: z.string().nullable().describe(`The reply, its first ${PREVIEW_CHARS} characters`),
      deliveryOutcome: z.string().nullable(),
      finishedAt: z.string().nullable(),
    })
    .nullable(),
});
/** A conversation list's sort key: its last activity (to the microsecond) and its id. */
const ConversationCursor = z.tuple([CursorInstant, CursorText]);

export function conversationRoutes(deps: {
  pool: Pool;
  temporal: Client;
  taskQueue: string;
  /** How long a conversation's workflow stays open idle (the deployment's default when unset). */
  conversationIdleMs?: number;
  temporalDeadlineMs: number;
  /** Wakes a waiting submission when a turn of its conversation ends. */
  hub: EventHub;
  /** Aborted when the API begins to close: a waiting submission answers at once instead of holding the close up. */
  closing: AbortSignal;
}): FastifyPluginAsyncZod {
  const { pool, temporal } = deps;
  // One listener on the API's closing for every waiting submission (not one each: Node warns past ten).
  const waiting = new Set<() => void>();
  deps.closing.addEventListener('abort', () => waiting.forEach((stopWaiting) => stopWaiting()), { once: true });
  return async (app) => {
    app.post(
      '/v1/agents/:agentId/conversations/:conversationId/messages',
      {
        schema: {
          tags: ['conversations'],
          summary: 'Submit a message; with wait, answer when its turn is done',
          params: ConversationParams,
          querystring: SubmitQuery,
          body: SubmitMessageBody,
          response: {
            200: SubmitResponse,
            202: SubmitResponse,
            400: ErrorResponse,
            401: ErrorResponse,
            404: ErrorResponse,
            413: ErrorResponse,
            503: ErrorResponse,
          },
        },
      },
      async (req, reply) => {
        const { agentId, conversationId } = req.params;
        const body = req.body;
        const message: InboundMessage = {
          messageId: body.messageId ?? randomUUID(),
          text: body.text,
          mode: body.mode ?? 'queue',
          ...(body.author ? { author: body.author } : {}),
          ...(body.delivery ? { delivery: body.delivery } : {}),
        };
        const to = { agentId, conversationId, taskQueue: deps.taskQueue, idleMs: deps.conversationIdleMs };
        const accepted = await submitToConversation(temporal, pool, to, message, deps.temporalDeadlineMs);
        const waitMs = req.query.wait * 1000;
        const key = conversationWorkflowId(agentId, conversationId);
        const { messageId } = accepted;
        const done = waitMs > 0 ? await waitForReply(key, messageId, waitMs, reply.raw) : 'gave_up';
        if (done === 'closing') {
          // The message is accepted and its turn goes on; posting it again (same messageId) answers with that turn.
          throw shuttingDown('post the message again with the same messageId to get its answer', { messageId });
        }
        if (done === 'gave_up') return reply.status(202).send(acceptedView(accepted));
        return reply.status(200).send(finishedView(accepted.messageId, done));
      },
    );

    /**
     * Until the turn ends, the deadline passes or the client leaves; the API beginning to close stops the wait at
     * once. The turn is read when a turn of the conversation ends (NOTIFY), and every FALLBACK_READ_MS besides.
     */
    async function waitForReply(
      key: string,
      messageId: string,
      waitMs: number,
      res: ServerResponse,
    ): Promise<FinishedTurn | 'closing' | 'gave_up'> {
      const cut = new AbortController();
      const stopWaiting = () => cut.abort();
      let expired = false;
      const timer = setTimeout(() => {
        expired = true;
        stopWaiting();
      }, waitMs);
      // The response closing before it was written means the client hung up: stop waiting for it. (The request
      // stream itself is destroyed as soon as its body has been read, so it says nothing about the client.)
      let clientGone = false;
      const onClose = () => {
        clientGone = !res.writableFinished;
        if (clientGone) stopWaiting();
      };
      res.once('close', onClose);
      waiting.add(stopWaiting);
      // Every reason that aborts `cut` is one here: a cut sleep is never followed by another read.
      const stop = (): 'closing' | 'gave_up' | undefined =>
        deps.closing.aborted ? 'closing' : expired || clientGone ? 'gave_up' : undefined;
      let wake: TurnEndWake | undefined;
      try {
        wake = await TurnEndWake.open(deps.hub, key, cut.signal);
        return await waitForTurnEnd(pool, key, messageId, { pollMs: FALLBACK_READ_MS, stop, sleep: wake.sleep });
      } finally {
        wake?.close();
        clearTimeout(timer);
        res.off('close', onClose);
        waiting.delete(stopWaiting);
      }
    }

    app.get(
      '/v1/agents/:agentId/conversations',
      {
        schema: {
          tags: ['conversations'],
          summary: "The agent's conversations, most recent activity first (jobs' and routines' included)",
          params: AgentParams,
          querystring: ConversationListQuery,
          response: { 200: Page(ConversationItem), 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        const { q, limit } = req.query;
        const after = decodeCursor(req.query.cursor, ConversationCursor);
        const rows = await listConversations(
          pool,
          agentId,
          { ...(q ? { q } : {}), previewChars: PREVIEW_CHARS },
          { ...(after ? { after: { at: after[0], conversationId: after[1] } } : {}), limit: limit + 1 },
        );
        return pageOf(
          rows,
          limit,
          (c) => [c.sortAt, c.conversationId],
          ({ sortAt: _sortAt, ...c }: ConversationSummary) => c,
        );
      },
    );

    app.get(
      '/v1/agents/:agentId/conversations/:conversationId',
      {
        schema: {
          tags: ['conversations'],
          summary: 'Conversation state and transcript',
          params: ReadableConversationParams,
          querystring: TranscriptQuery,
          response: { 200: ConversationView, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, conversationId } = req.params;
        const found = await conversationWithTranscript(pool, agentId, conversationId, req.query, () =>
          queryConversationState(temporal, agentId, conversationId),
        );
        if (!found) throw notFound(`conversation ${conversationId}`);
        const { state, messages } = found;
        return {
          conversationId,
          state: { busy: state.busy, queued: state.queued, liveDelegates: state.liveDelegates },
          messages,
        };
      },
    );
  };
}

function acceptedView(r: SubmitResult) {
  return { messageId: r.messageId, turnId: r.turnId, status: r.status };
}

function finishedView(messageId: string, t: FinishedTurn) {
  return {
    messageId,
    turnId: t.turnId,
    status: t.status,
    ...(t.reply ? { reply: t.reply } : {}),
    ...(t.error ? { error: t.error } : {}),
  };
}
