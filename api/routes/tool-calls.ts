import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { storableString } from '../../domain/text';
import { TOOL_CALL_STATUSES } from '../../domain/tool-calls';
import { decideOnToolCall, listToolCalls, toolCall, type ToolCallRow } from '../../services/tool-call-decisions';
import { ApiError, notFound } from '../errors';
import { decisionNotTaken, type DecisionRouteDeps } from '../decisions';
import { CursorInstant, decodeCursor, Page, PageQuery, pageOf } from '../pagination';
import { AgentParams, ErrorResponse, Id } from '../schemas';

const ToolCallParams = z.object({ agentId: Id, callId: z.uuid('a tool call id (a UUID)') });
const Status = z.enum(TOOL_CALL_STATUSES as [ToolCallRow['status'], ...ToolCallRow['status'][]]);
const ToolCallsQuery = PageQuery.extend({
  status: Status.optional().describe('Only calls in this state (unknown: sent, and no answer came back)'),
}).strict();
const ToolCallCursor = z.tuple([CursorInstant, z.uuid()]);

/** Where a decision on a waiting call is sent. */
export const toolCallDecisionRoute = (verdict: 'approve' | 'reject') =>
  `/v1/agents/:agentId/tool-calls/:callId/${verdict}` as const;

export const ToolCall = z.object({
  id: z.string(),
  server: z.string(),
  tool: z.string(),
  modelName: z.string(),
  arguments: z.record(z.string(), z.unknown()),
  origin: z.object({
    kind: z.enum(['conversation', 'delegate']),
    conversationKey: z.string(),
    turnId: z.string(),
    delegateId: z.string().nullable(),
  }),
  policy: z.enum(['auto', 'approve', 'deny']),
  status: Status,
  decidedBy: z.string().nullable(),
  note: z.string().nullable(),
  resultPreview: z.string().nullable().describe('The first 1,000 characters of the result, after the secret scan'),
  resultBytes: z.number().nullable(),
  redactions: z.array(z.string()).describe('The secret rules that redacted something from the result'),
  failure: z.string().nullable().describe('Why there is no result (an unknown outcome says what happened)'),
  durationMs: z.number().nullable(),
  createdAt: z.string(),
  expiresAt: z.string().nullable(),
  decidedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
});

export function toolCallView(c: ToolCallRow): z.infer<typeof ToolCall> {
  return {
    id: c.id,
    server: c.server,
    tool: c.tool,
    modelName: c.modelName,
    arguments: c.arguments,
    origin: { kind: c.origin, conversationKey: c.conversationKey, turnId: c.turnId, delegateId: c.delegateId },
    policy: c.policy,
    status: c.status,
    decidedBy: c.decidedBy,
    note: c.note,
    resultPreview: c.result === null ? null : c.result.slice(0, 1_000),
    resultBytes: c.resultBytes,
    redactions: c.redactions,
    failure: c.failure,
    durationMs: c.durationMs,
    createdAt: c.createdAt,
    expiresAt: c.expiresAt,
    decidedAt: c.decidedAt,
    finishedAt: c.finishedAt,
  };
}

const errors = { 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse, 503: ErrorResponse };

/** An agent's tool calls (the unknown ones a person must look at), and a person's decision on one that waits. */
export function toolCallRoutes(deps: DecisionRouteDeps): FastifyPluginAsyncZod {
  const { pool, temporal } = deps;
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/tool-calls',
      {
        schema: {
          tags: ['tools'],
          summary: "The agent's tool calls, newest first; ?status=unknown lists the calls a person must check",
          params: AgentParams,
          querystring: ToolCallsQuery,
          response: { 200: Page(ToolCall), ...errors },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        const after = decodeCursor(req.query.cursor, ToolCallCursor);
        const rows = await listToolCalls(pool, agentId, req.query.status ? { status: req.query.status } : {}, {
          ...(after ? { after: { at: after[0], id: after[1] } } : {}),
          limit: req.query.limit + 1,
        });
        return pageOf(rows, req.query.limit, (c) => [c.sortAt, c.id], toolCallView);
      },
    );

    app.get(
      '/v1/agents/:agentId/tool-calls/:callId',
      {
        schema: {
          tags: ['tools'],
          summary: 'One tool call',
          params: ToolCallParams,
          response: { 200: ToolCall, ...errors },
        },
      },
      async (req) => {
        const { agentId, callId } = req.params;
        const call = await toolCall(pool, callId);
        if (!call || call.agentId !== agentId) throw notFound(`tool call ${callId}`);
        return toolCallView(call);
      },
    );

    for (const verdict of ['approve', 'reject'] as const) {
      app.post(
        toolCallDecisionRoute(verdict),
        {
          schema: {
            tags: ['tools'],
            summary:
              verdict === 'approve'
                ? 'Approve a tool call that waits: it runs once, with the arguments shown'
                : 'Reject a tool call that waits: it does not run, and the model reads the note',
            params: ToolCallParams,
            body: z
              .object({ note: storableString().max(2_000).optional() })
              .strict()
              .nullish(),
            response: { 200: ToolCall, ...errors },
          },
        },
        async (req) => {
          const { agentId, callId } = req.params;
          const decided = await decideOnToolCall(pool, temporal, deps.temporalDeadlineMs, {
            agentId,
            callId,
            approved: verdict === 'approve',
            note: req.body?.note,
            actor: req.actor,
          });
          if (decided.ok) return toolCallView(decided.call);
          switch (decided.why) {
            case 'not_found':
              throw notFound(`tool call ${callId}`);
            case 'not_awaiting_approval':
              throw new ApiError(
                409,
                'not_awaiting_approval',
                `tool call ${callId} is ${decided.status}, not waiting for approval`,
              );
            default:
              throw decisionNotTaken(decided.why, `tool call ${callId} is not waiting for approval`);
          }
        },
      );
    }
  };
}
