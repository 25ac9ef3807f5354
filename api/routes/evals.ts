import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { EVALS, EVAL_MODES, type EvalMode } from '../../domain/evals';
import { TURN_STATUSES } from '../../domain/conversation';
import { BudgetsSchema } from '../../domain/spend';
import { TOOL_POLICIES, type ToolPolicy } from '../../domain/tool-servers';
import { CaseError } from '../../services/eval-cases';
import { evalCaseView, evalView, latestEvals, startEval } from '../../services/evals';
import { enableForkTools, forkConversation, forkDetails } from '../../services/forks';
import { ApiError, notFound } from '../errors';
import { storableJson, storableString } from '../../domain/text';
import { AgentParams, ConversationParams, dateTime, ErrorResponse, Id } from '../schemas';

const Candidate = z
  .object({
    systemPrompt: storableString().max(100_000).nullable().optional().describe("Replaces the agent's own instructions"),
    memoryVersion: z
      .int()
      .positive()
      .max(2_147_483_647)
      .optional()
      .describe("A version of the agent's memory instead of its current one"),
    model: storableString().min(1).max(200).optional(),
    toolPolicies: z
      .record(storableString().min(1).max(200), z.enum(TOOL_POLICIES as unknown as [ToolPolicy, ...ToolPolicy[]]))
      .optional()
      .describe('Policies by tool (its model-facing name, server__tool); a denied tool is not offered'),
    toolServers: z.array(storableString().min(1).max(32)).max(50).optional().describe('The servers offered, by name'),
    budgets: BudgetsSchema.optional(),
  })
  .strict()
  .describe("An overlay of the agent's configuration; it is never applied to the agent");

const regex = storableString()
  .max(200)
  .refine(
    (s) => {
      try {
        new RegExp(s);
        return true;
      } catch {
        return false;
      }
    },
    { message: 'not a valid regular expression' },
  );
const Outcome = z.enum(TURN_STATUSES.filter((s) => s !== 'queued' && s !== 'running') as [string, ...string[]]);
const Turn = z.int().positive().optional().describe('The turn (1-based) the check looks at; any turn when absent');
const Args = z.record(storableString(), storableJson());
const Check = z.union([
  z.object({ replyContains: storableString().min(1), turn: Turn }).strict(),
  z.object({ replyMatches: regex, turn: Turn }).strict(),
  z.object({ toolCalled: storableString().min(1), arguments: Args.optional() }).strict(),
  z.object({ toolNotCalled: storableString().min(1) }).strict(),
  z.object({ outcome: Outcome, turn: Turn }).strict(),
  z.object({ guard: z.enum(['passed', 'blocked']), turn: Turn }).strict(),
  z.object({ costUsdAtMost: z.number().nonnegative() }).strict(),
  z.object({ turnsAtMost: z.int().positive() }).strict(),
  z
    .object({
      judge: z.object({ rubric: storableString().min(1).max(10_000), model: storableString().optional() }).strict(),
    })
    .strict(),
]);
const ToolResult = z
  .object({
    tool: storableString().min(1),
    arguments: Args,
    content: storableString(),
    isError: z.boolean().optional(),
  })
  .strict();
const WrittenCase = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9._-]{1,100}$/, '1–100 characters of [A-Za-z0-9._-]'),
    messages: z.array(storableString().min(1).max(32_768)).min(1).max(EVALS.maxTurns).describe('Each message one turn'),
    tools: z.array(ToolResult).max(500).optional().describe("Answers for the candidate's tool calls"),
    expect: z.array(Check).max(50).optional(),
  })
  .strict();
const RecordedSelection = z
  .object({
    conversationIds: z.array(Id).max(EVALS.maxQueried).optional(),
    query: z
      .object({
        outcome: Outcome.optional(),
        since: dateTime().optional(),
        until: dateTime().optional(),
        withToolCalls: z.boolean().optional().describe('Only conversations with a turn that called a tool'),
        limit: z.int().min(1).max(EVALS.maxQueried).optional(),
      })
      .strict()
      .optional(),
    turns: z.object({ from: z.int().positive(), to: z.int().positive().optional() }).strict().optional(),
    expect: z.array(Check).max(50).optional(),
  })
  .strict();
const EvalBody = z
  .object({
    mode: z
      .enum(EVAL_MODES as unknown as [EvalMode, ...EvalMode[]])
      .describe(
        'replay: model answers come from the recording (no model call); live-model: the candidate model is called',
      ),
    candidate: Candidate.default({}),
    suite: storableString().min(1).max(200).optional(),
    recorded: RecordedSelection.optional(),
    written: z.array(WrittenCase).max(EVALS.maxCases).optional(),
  })
  .strict()
  .refine((b) => b.recorded !== undefined || (b.written?.length ?? 0) > 0, {
    message: 'an evaluation needs recorded conversations, written cases, or both',
  });

const Divergence = z.object({
  turn: z.number(),
  callIndex: z.number(),
  part: z.enum(['model', 'system', 'tools', 'messages']),
  diff: z.string(),
});
const CaseResult = z.object({
  passed: z.boolean(),
  reasons: z.array(z.string()),
  costUsd: z.number(),
  latencyMs: z.number(),
  modelCalls: z.number(),
  turns: z.number(),
  changedTurns: z.array(z.number()),
  toolCallDiff: z.array(z.object({ turn: z.number(), added: z.array(z.string()), removed: z.array(z.string()) })),
  firstDivergence: Divergence.optional(),
});
const EvalCase = z.object({
  caseId: z.string(),
  source: z.enum(['recorded', 'written']),
  status: z.enum(['pending', 'passed', 'failed']),
  result: CaseResult.nullable(),
});
const Summary = z.union([
  z.object({ cases: z.number(), passed: z.number(), failed: z.number(), costUsd: z.number(), modelCalls: z.number() }),
  z.object({ error: z.string() }),
]);
const EvalHead = z.object({
  id: z.string(),
  agentId: z.string(),
  mode: z.enum(EVAL_MODES as unknown as [EvalMode, ...EvalMode[]]),
  candidate: Candidate,
  suite: z.string().nullable(),
  status: z.enum(['running', 'finished', 'failed']),
  summary: Summary.nullable(),
  actor: z.string(),
  createdAt: z.string(),
  finishedAt: z.string().nullable(),
});
const Eval = EvalHead.extend({ cases: z.array(EvalCase) });
const Block = z.union([
  z.object({ type: z.literal('text'), text: z.string() }),
  z.object({ type: z.literal('tool_use'), id: z.string(), name: z.string(), input: Args }),
  z.object({
    type: z.literal('tool_result'),
    tool_use_id: z.string(),
    content: z.string(),
    is_error: z.boolean().optional(),
    ref: z.string().optional(),
  }),
]);
const Row = z.object({ role: z.enum(['user', 'assistant', 'system', 'tool']), content: z.array(Block) });
const ToolCall = z.object({
  name: z.string(),
  arguments: Args,
  answeredBy: z.enum(['recording', 'dry-run', 'denied', 'needs-approval', 'channel']),
  isError: z.boolean(),
});
const CandidateTurn = z.object({
  turn: z.number(),
  rows: z.array(Row),
  outcome: z.string(),
  reply: z.string().nullable(),
  guard: z.array(z.object({ verdict: z.enum(['passed', 'blocked']), rule: z.string().optional() })),
  toolCalls: z.array(ToolCall),
  modelCalls: z.number(),
  costUsd: z.number(),
  latencyMs: z.number(),
  divergence: Divergence.optional(),
});
const CaseDetail = EvalCase.extend({
  turns: z.array(
    z.object({
      turn: z.number(),
      recorded: z.object({ rows: z.array(Row), outcome: z.string(), reply: z.string().nullable() }).nullable(),
      candidate: CandidateTurn.nullable(),
    }),
  ),
});
const EvalParams = AgentParams.extend({ evalId: z.uuid() });
const Fork = z.object({
  conversationId: z.string(),
  forkedFrom: z.string(),
  atTurn: z.number(),
  candidate: Candidate,
  enabledTools: z.array(z.string()).describe("Tools whose calls have real effects; every other tool's are dry runs"),
});

/** Evaluations against a candidate, and forks of conversations (services/evals.ts, services/forks.ts). */
export function evalRoutes(deps: { pool: Pool; temporal: Client; taskQueue: string }): FastifyPluginAsyncZod {
  const { pool, temporal, taskQueue } = deps;
  const caseError = (err: unknown) =>
    err instanceof CaseError
      ? new ApiError(err.status, err.status === 404 ? 'not_found' : 'invalid_request', err.message)
      : err;
  return async (app) => {
    app.post(
      '/v1/agents/:agentId/evals',
      {
        schema: {
          tags: ['evals'],
          summary: 'Evaluate the agent under a candidate configuration, on recorded conversations and written cases',
          description:
            'Answers 202 with the evaluation; GET it to follow its cases. A replay makes no model call; a ' +
            'live-model run calls the candidate model, metered. Neither sends anything: tool calls are answered ' +
            'from the recording (or as dry runs), replies are checked and kept.',
          params: AgentParams,
          body: EvalBody,
          response: { 202: Eval, 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req, reply) => {
        const started = await startEval(pool, temporal, taskQueue, {
          ...req.body,
          agentId: req.params.agentId,
          actor: req.actor,
        }).catch((err: unknown) => {
          throw caseError(err);
        });
        if (!started) throw notFound(`agent ${req.params.agentId}`);
        const view = await evalView(pool, req.params.agentId, started.id);
        if (!view) throw notFound(`evaluation ${started.id}`);
        return reply.status(202).send(view);
      },
    );

    app.get(
      '/v1/agents/:agentId/evals',
      {
        schema: {
          tags: ['evals'],
          summary: "The agent's latest evaluations, newest first",
          params: AgentParams,
          response: { 200: z.object({ items: z.array(EvalHead) }) },
        },
      },
      async (req) => ({ items: await latestEvals(pool, req.params.agentId) }),
    );

    app.get(
      '/v1/agents/:agentId/evals/:evalId',
      {
        schema: {
          tags: ['evals'],
          summary: 'An evaluation and its cases: pass or fail with reasons, cost, latency and the tool-call diff',
          params: EvalParams,
          response: { 200: Eval, 404: ErrorResponse },
        },
      },
      async (req) => {
        const found = await evalView(pool, req.params.agentId, req.params.evalId);
        if (!found) throw notFound(`evaluation ${req.params.evalId}`);
        return found;
      },
    );

    app.get(
      '/v1/agents/:agentId/evals/:evalId/cases/:caseId',
      {
        schema: {
          tags: ['evals'],
          summary: 'One case side by side: the recorded turns and the candidate turns',
          params: EvalParams.extend({ caseId: z.string().min(1).max(300) }),
          response: { 200: CaseDetail, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, evalId, caseId } = req.params;
        const found = await evalCaseView(pool, agentId, evalId, caseId);
        if (!found) throw notFound(`case ${caseId} of evaluation ${evalId}`);
        return found;
      },
    );

    app.post(
      '/v1/agents/:agentId/conversations/:conversationId/forks',
      {
        schema: {
          tags: ['evals'],
          summary: 'Fork a conversation at a turn: a new sandbox conversation under a candidate',
          description:
            'The fork holds turns 1 to atTurn and goes on as any conversation does, under the candidate. Its tool ' +
            'calls are dry runs unless a person enables a tool (PUT …/fork/effects). The original is only read.',
          params: ConversationParams,
          body: z.object({ atTurn: z.int().positive(), candidate: Candidate.default({}) }).strict(),
          response: { 201: Fork, 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req, reply) => {
        const { agentId, conversationId } = req.params;
        const fork = await forkConversation(pool, { agentId, conversationId, ...req.body, actor: req.actor }).catch(
          (err: unknown) => {
            throw caseError(err);
          },
        );
        if (!fork) throw notFound(`conversation ${conversationId} with a finished turn`);
        return reply.status(201).send(fork);
      },
    );

    app.get(
      '/v1/agents/:agentId/conversations/:conversationId/fork',
      {
        schema: {
          tags: ['evals'],
          summary: 'What a fork was forked from, its candidate and the tools with real effects',
          params: ConversationParams,
          response: { 200: Fork, 404: ErrorResponse },
        },
      },
      async (req) => {
        const found = await forkDetails(pool, req.params.agentId, req.params.conversationId);
        if (!found) throw notFound(`fork ${req.params.conversationId}`);
        return found;
      },
    );

    app.put(
      '/v1/agents/:agentId/conversations/:conversationId/fork/effects',
      {
        schema: {
          tags: ['evals'],
          summary: "Which of a fork's tools have real effects (model-facing names); the others stay dry runs",
          params: ConversationParams,
          body: z.object({ tools: z.array(storableString().min(1).max(200)).max(200) }).strict(),
          response: { 200: Fork, 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, conversationId } = req.params;
        const fork = await enableForkTools(pool, {
          agentId,
          conversationId,
          tools: req.body.tools,
          actor: req.actor,
        }).catch((err: unknown) => {
          throw caseError(err);
        });
        if (!fork) throw notFound(`fork ${conversationId}`);
        return fork;
      },
    );
  };
}
