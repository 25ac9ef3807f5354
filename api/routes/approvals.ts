import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { fileChanges } from '../../domain/admission';
import { DeliveryShown, shownDelivery } from '../delivery-shown';
import { pendingApprovals, type PendingApproval } from '../../services/approvals';
import { CursorInstant, CursorText, decodeCursor, Page, PageQuery, pageOf } from '../pagination';
import { AgentParams, ErrorResponse } from '../schemas';
import { Change } from './memory';
import { Check, proposalDecisionRoute } from './proposals';
import { Gate, routineRunDecisionRoute } from './routines';
import { ToolCall, toolCallDecisionRoute, toolCallView } from './tool-calls';

const Decision = z.object({ method: z.literal('POST'), path: z.string() });
const Waiting = {
  waitingSince: z.string().describe('When the wait for a decision began'),
  expiresAt: z.string().describe('When the wait ends without a decision (and the item is rejected)'),
  approve: Decision,
  reject: Decision,
};
/** What every kind of approval begins with: its kind, its agent, and the id its decision is about. */
const about = <K extends string>(kind: K, id: string) => ({
  kind: z.literal(kind),
  agentId: z.string(),
  id: z.string().describe(id),
});
const RoutineRunApproval = z.object({
  ...about('routine_run', 'The run id'),
  appId: z.string(),
  slug: z.string(),
  label: z.string().describe("The routine's label (its slug when the routine was deleted since)"),
  gate: Gate.extend({
    target: DeliveryShown.optional().describe('Where the gated call would send (a webhook shown without its secret)'),
  }),
  ...Waiting,
});
const ProposalApproval = z.object({
  ...about('proposal', 'The proposal id'),
  reason: z.string().describe('Why it waits for a person (the human_approval check)'),
  changes: z.array(Change),
  conversationIds: z.array(z.string()),
  baseVersion: z.number(),
  tier: z.string().nullable(),
  checks: z.array(Check),
  files: z
    .array(z.object({ path: z.string(), before: z.string().nullable(), after: z.string().nullable() }))
    .describe('Each file it touches, in its base version and as the proposal leaves it (null: absent)'),
  ...Waiting,
});
const ToolCallApproval = z.object({
  ...about('tool_call', "The tool call's id"),
  server: z.string(),
  tool: z.string(),
  modelName: z.string(),
  arguments: z.record(z.string(), z.unknown()).describe('Exactly what the call will be sent with, if approved'),
  origin: ToolCall.shape.origin,
  ...Waiting,
});
const Approval = z.discriminatedUnion('kind', [RoutineRunApproval, ProposalApproval, ToolCallApproval]);
const ApprovalsQuery = PageQuery.strict();
/** An approvals list's sort key: when the wait began (to the microsecond) and the run's or proposal's id. */
const ApprovalCursor = z.tuple([CursorInstant, CursorText]);

/** A route pattern with its parameters filled in. */
const pathOf = (route: string, params: Record<string, string>) =>
  route.replace(/:([A-Za-z]+)/g, (_, name: string) => encodeURIComponent(params[name] ?? ''));

function approvalView(a: PendingApproval): z.infer<typeof Approval> {
  const waiting = { waitingSince: a.waitingSince, expiresAt: a.expiresAt };
  if (a.kind === 'routine_run') {
    const { run } = a;
    // Written with the needs_approval status, in one write: never absent on a waiting run.
    const gate = run.gate ?? { capability: '', detail: '' };
    const params = { agentId: run.agentId, runId: run.runId };
    return {
      kind: 'routine_run',
      agentId: run.agentId,
      id: run.runId,
      appId: run.appId,
      slug: run.slug,
      label: a.label ?? run.slug,
      gate: {
        capability: gate.capability,
        detail: gate.detail,
        ...(a.target ? { target: shownDelivery(a.target) } : {}),
      },
      ...waiting,
      approve: { method: 'POST', path: pathOf(routineRunDecisionRoute('approve'), params) },
      reject: { method: 'POST', path: pathOf(routineRunDecisionRoute('reject'), params) },
    };
  }
  if (a.kind === 'tool_call') {
    const c = toolCallView(a.call);
    const params = { agentId: a.agentId, callId: c.id };
    return {
      kind: 'tool_call',
      agentId: a.agentId,
      id: c.id,
      server: c.server,
      tool: c.tool,
      modelName: c.modelName,
      arguments: c.arguments,
      origin: c.origin,
      ...waiting,
      approve: { method: 'POST', path: pathOf(toolCallDecisionRoute('approve'), params) },
      reject: { method: 'POST', path: pathOf(toolCallDecisionRoute('reject'), params) },
    };
  }
  const p = a.proposal;
  const params = { agentId: p.agentId, id: p.id };
  const edits = p.answer.status === 'ok' ? p.answer.edits : [];
  return {
    kind: 'proposal',
    agentId: p.agentId,
    id: p.id,
    reason: p.checks.find((c) => c.name === 'human_approval')?.detail ?? 'waiting for approval',
    changes: edits.map(({ content: _content, ...change }) => change),
    conversationIds: p.conversationIds,
    baseVersion: p.baseVersion,
    tier: p.tier,
    checks: p.checks,
    files: p.answer.status === 'ok' ? fileChanges(a.baseFiles, p.answer) : [],
    ...waiting,
    approve: { method: 'POST', path: pathOf(proposalDecisionRoute('approve'), params) },
    reject: { method: 'POST', path: pathOf(proposalDecisionRoute('reject'), params) },
  };
}

/**
 * What waits for a person's decision, oldest first: routine runs stopped at a gate and reflection proposals, each
 * with the paths that decide it. One agent's, or (for an operator's token) every agent's.
 */
export function approvalRoutes(pool: Pool): FastifyPluginAsyncZod {
  const list = async (scope: { agentId?: string }, query: z.infer<typeof ApprovalsQuery>) => {
    const after = decodeCursor(query.cursor, ApprovalCursor);
    const rows = await pendingApprovals(pool, scope, {
      ...(after ? { after: { at: after[0], id: after[1] } } : {}),
      limit: query.limit + 1,
    });
    return pageOf(rows, query.limit, (a) => [a.sortAt, a.id], approvalView);
  };
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/approvals',
      {
        schema: {
          tags: ['approvals'],
          summary: "The agent's pending approvals (routine runs at a gate, proposals, tool calls), oldest first",
          params: AgentParams,
          querystring: ApprovalsQuery,
          response: { 200: Page(Approval), 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req) => {
        return list({ agentId: req.params.agentId }, req.query);
      },
    );

    app.get(
      '/v1/approvals',
      {
        schema: {
          tags: ['approvals'],
          operationId: 'getEveryAgentsApprovals',
          summary: "Every agent's pending approvals, oldest waiting first (an operator's token, scoped to *)",
          querystring: ApprovalsQuery,
          response: { 200: Page(Approval), 400: ErrorResponse, 403: ErrorResponse },
        },
      },
      // Operators' tokens only (api/auth.ts decides).
      async (req) => list({}, req.query),
    );
  };
}
