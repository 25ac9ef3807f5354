import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { conversationExists, conversationStateFromDb, getTurn, listMessages, turnOfMessage, type TurnView } from '../../db/conversations';
import type { Pool } from '../../db/pool';
import { isFinished, type FinishedTurnStatus, type SubmitResult } from '../../domain/conversation';
import { conversationWorkflowId } from '../../domain/ids';
import { SubmitMessageBody } from '../../domain/messages';
import { assertAgentAccess } from '../auth';
import { queryConversationState, submitToConversation } from '../conversation-client';
import { notFound, shuttingDown } from '../errors';
import { ConversationParams, ConversationView, ErrorResponse, SubmitQuery, SubmitResponse, TranscriptQuery } from '../schemas';

const POLL_MS = 50;

export function conversationRoutes(deps: {
  pool: Pool;
  temporal: Client;
  taskQueue: string;
  temporalDeadlineMs: number;
  /** Aborted when the API begins to close: a waiting submission answers at once instead of holding the close up. */
  closing: AbortSignal;
}): FastifyPluginAsyncZod {
  const { pool, temporal } = deps;
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
          response: { 200: SubmitResponse, 202: SubmitResponse, 400: ErrorResponse, 401: ErrorResponse, 404: ErrorResponse, 413: ErrorResponse, 503: ErrorResponse },
        },
      },
      async (req, reply) => {
        const { agentId, conversationId } = req.params;
        assertAgentAccess(req, agentId);
        const body = req.body;
        const accepted = await submitToConversation(temporal, deps.taskQueue, agentId, conversationId, {
          messageId: body.messageId ?? randomUUID(),
          text: body.text,
          mode: body.mode ?? 'queue',
          ...(body.author ? { author: body.author } : {}),
          ...(body.delivery ? { delivery: body.delivery } : {}),
        }, deps.temporalDeadlineMs);
        const waitMs = req.query.wait * 1000;
        // The response closing before it was written means the client hung up: stop waiting for it. (The request
        // stream itself is destroyed as soon as its body has been read, so it says nothing about the client.)
        let clientGone = false;
        reply.raw.once('close', () => {
          clientGone = !reply.raw.writableFinished;
        });
        const gone = () => clientGone;
        const key = conversationWorkflowId(agentId, conversationId);
        const { messageId } = accepted;
        const deadline = Date.now() + waitMs;
        const done = waitMs > 0 ? await waitForTurn(pool, key, messageId, deadline, gone, deps.closing) : undefined;
        if (done === 'closing') {
          // The message is accepted and its turn goes on; posting it again (same messageId) answers with that turn.
          throw shuttingDown('post the message again with the same messageId to get its answer', { messageId });
        }
        if (!done) return reply.status(202).send(acceptedView(accepted));
        return reply.status(200).send(finishedView(accepted.messageId, done));
      },
    );

    app.get(
      '/v1/agents/:agentId/conversations/:conversationId',
      {
        schema: {
          tags: ['conversations'],
          summary: 'Conversation state and transcript',
          params: ConversationParams,
          querystring: TranscriptQuery,
          response: { 200: ConversationView, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, conversationId } = req.params;
        assertAgentAccess(req, agentId);
        const key = conversationWorkflowId(agentId, conversationId);
        if (!(await conversationExists(pool, key))) throw notFound(`conversation ${conversationId}`);
        const [messages, live] = await Promise.all([listMessages(pool, key, req.query.afterSeq, req.query.limit), queryConversationState(temporal, agentId, conversationId)]);
        const state = live ?? { ...(await conversationStateFromDb(pool, key)), liveDelegates: [] };
        return { conversationId, state: { busy: state.busy, queued: state.queued, liveDelegates: state.liveDelegates }, messages };
      },
    );
  };
}

function acceptedView(r: SubmitResult) {
  return { messageId: r.messageId, turnId: r.turnId, status: r.status };
}

function finishedView(messageId: string, t: TurnView & { status: FinishedTurnStatus }) {
  return {
    messageId,
    turnId: t.turnId,
    status: t.status,
    ...(t.reply ? { reply: t.reply } : {}),
    ...(t.error ? { error: t.error } : {}),
  };
}

/**
 * Waits for the turn that answers the message (a steered message's turn may change while it waits): the finished
 * turn, undefined at the deadline or when the client left, or 'closing' when the API began to close first.
 */
async function waitForTurn(
  pool: Pool,
  conversationKey: string,
  messageId: string,
  deadline: number,
  clientGone: () => boolean,
  closing: AbortSignal,
): Promise<(TurnView & { status: FinishedTurnStatus }) | 'closing' | undefined> {
  for (;;) {
    const turnId = await turnOfMessage(pool, conversationKey, messageId);
    const turn = turnId ? await getTurn(pool, conversationKey, turnId) : undefined;
    if (turn && isFinished(turn)) return turn;
    if (closing.aborted) return 'closing';
    if (Date.now() >= deadline || clientGone()) return undefined;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
