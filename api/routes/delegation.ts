import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { cancelDelegate } from '../../contracts/delegate';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { getDelegate, listDelegates } from '../../db/delegates';
import { recordAudit } from '../../db/audit';
import { createTask, getTask, listTasks, moveTask, putSkill, taskAttempts } from '../../db/tasks';
import type { Pool } from '../../db/pool';
import { NewTask, OUTCOME_KINDS, SkillName, TASK_STATUSES } from '../../domain/delegation';
import { delegateWorkflowId } from '../../domain/ids';
import { storableString } from '../../domain/text';
import { assertAgentAccess } from '../auth';
import { ApiError, notFound } from '../errors';
import { CursorInstant, CursorText, decodeCursor, Page, PageQuery, pageOf } from '../pagination';
import { AgentParams, ErrorResponse, Id, wholeNumber } from '../schemas';

const TaskParams = z.object({ agentId: Id, number: wholeNumber(1, 2_147_483_647) });
const Task = z.object({
  number: z.number(),
  title: z.string(),
  description: z.string(),
  status: z.enum(TASK_STATUSES),
  requiredSkills: z.array(z.string()),
  historyMode: z.enum(['clean', 'fork']),
  wallClockSeconds: z.number(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
const TaskWithAttempts = Task.extend({
  attempts: z.array(
    z.object({
      attempt: z.number(),
      delegateId: z.string(),
      startedAt: z.string(),
      endedAt: z.string().nullable(),
      outcome: z.string().nullable(),
      summary: z.string().nullable(),
    }),
  ),
});
/** A task board page's cursor: the last task's number. */
const TaskCursor = z.tuple([z.number().int().positive().max(2_147_483_647)]);
const DelegateParams = z.object({ agentId: Id, delegateId: z.string().regex(/^[A-Za-z0-9-]{1,64}$/) });
const Delegate = z.object({
  delegateId: z.string(),
  conversationId: z.string(),
  taskNumber: z.number().optional(),
  lifecycle: z.string(),
  outcome: z
    .object({
      kind: z.enum(OUTCOME_KINDS),
      result: z.string(),
      outcomeVersion: z.number(),
      transcriptVersion: z.number(),
      terminalOwner: z.string(),
    })
    .optional(),
  admittedAt: z.string().optional(),
  relay: z.string().optional(),
  budgetBlocked: z
    .string()
    .optional()
    .describe('Waiting for this budget to be raised (PUT the agent with a higher one); it goes on from there'),
  admissions: z.array(z.object({ outcomeVersion: z.number(), decision: z.string(), via: z.string(), at: z.string() })),
});

const DelegateListQuery = PageQuery.extend({
  status: z
    .enum(['live', 'completed', ...OUTCOME_KINDS])
    .optional()
    .describe('live (not completed), completed, or the outcome kind it ended with'),
}).strict();
/** A delegate list's sort key: its creation (to the microsecond) and its id. */
const DelegateCursor = z.tuple([CursorInstant, CursorText]);

export function delegationRoutes(deps: { pool: Pool; temporal: Client }): FastifyPluginAsyncZod {
  const { pool, temporal } = deps;
  return async (app) => {
    app.post(
      '/v1/agents/:agentId/tasks',
      {
        schema: {
          tags: ['tasks'],
          summary: 'Create a task on the board',
          params: AgentParams,
          body: NewTask,
          response: { 201: Task, 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req, reply) => {
        assertAgentAccess(req, req.params.agentId);
        return reply.status(201).send(await createTask(pool, req.params.agentId, req.body));
      },
    );

    app.get(
      '/v1/agents/:agentId/tasks',
      {
        schema: {
          tags: ['tasks'],
          summary: "The agent's task board, in number order",
          params: AgentParams,
          querystring: PageQuery.strict(),
          response: { 200: Page(Task), 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        assertAgentAccess(req, agentId);
        const { limit } = req.query;
        const after = decodeCursor(req.query.cursor, TaskCursor);
        const rows = await listTasks(pool, agentId, { ...(after ? { after: after[0] } : {}), limit: limit + 1 });
        return pageOf(
          rows,
          limit,
          (t) => [t.number],
          (t) => t,
        );
      },
    );

    app.get(
      '/v1/agents/:agentId/tasks/:number',
      {
        schema: {
          tags: ['tasks'],
          summary: 'A task with its attempts',
          params: TaskParams,
          response: { 200: TaskWithAttempts, 404: ErrorResponse },
        },
      },
      async (req) => {
        assertAgentAccess(req, req.params.agentId);
        const task = await getTask(pool, req.params.agentId, req.params.number);
        if (!task) throw notFound(`task #${req.params.number}`);
        return { ...task, attempts: await taskAttempts(pool, req.params.agentId, req.params.number) };
      },
    );

    app.patch(
      '/v1/agents/:agentId/tasks/:number',
      {
        schema: {
          tags: ['tasks'],
          summary: 'Move a task (approve: pending_approval → ready)',
          params: TaskParams,
          body: z.object({ status: z.enum(TASK_STATUSES) }).strict(),
          response: { 200: Task, 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse },
        },
      },
      async (req) => {
        assertAgentAccess(req, req.params.agentId);
        const { agentId, number } = req.params;
        const to = req.body.status;
        // An approval is a person's decision: it goes in the audit trail, in the move's own transaction.
        const moved = await moveTask(pool, agentId, number, to, async (db, from) => {
          if (from !== 'pending_approval' || to !== 'ready') return;
          await recordAudit(db, { agentId, action: 'task.approve', actor: req.actor, subject: `#${number}` });
        });
        if (moved.ok) return moved.task;
        if (moved.reason === 'not_found') throw notFound(`task #${req.params.number}`);
        throw new ApiError(
          409,
          'invalid_transition',
          `task #${req.params.number} cannot move from ${moved.from} to ${req.body.status}`,
        );
      },
    );

    app.put(
      '/v1/agents/:agentId/skills/:name',
      {
        schema: {
          tags: ['skills'],
          summary: 'Create or replace a skill',
          params: z.object({ agentId: Id, name: SkillName }),
          body: z.object({ body: storableString().min(1).max(200_000) }).strict(),
          response: {
            200: z.object({ name: z.string(), body: z.string(), updatedAt: z.string() }),
            400: ErrorResponse,
            404: ErrorResponse,
          },
        },
      },
      async (req) => {
        assertAgentAccess(req, req.params.agentId);
        return putSkill(pool, req.params.agentId, req.params.name, req.body.body);
      },
    );

    app.get(
      '/v1/agents/:agentId/delegates',
      {
        schema: {
          tags: ['delegates'],
          summary: "The agent's delegates, newest first, each as GET …/delegates/:delegateId shows it",
          params: AgentParams,
          querystring: DelegateListQuery,
          response: { 200: Page(Delegate), 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId } = req.params;
        assertAgentAccess(req, agentId);
        const { status, limit } = req.query;
        const after = decodeCursor(req.query.cursor, DelegateCursor);
        const rows = await listDelegates(
          pool,
          agentId,
          { ...(status ? { status } : {}) },
          { ...(after ? { after: { at: after[0], delegateId: after[1] } } : {}), limit: limit + 1 },
        );
        return pageOf(
          rows,
          limit,
          (d) => [d.sortAt, d.delegateId],
          ({ sortAt: _sortAt, ...d }) => d,
        );
      },
    );

    app.get(
      '/v1/agents/:agentId/delegates/:delegateId',
      {
        schema: {
          tags: ['delegates'],
          summary: 'A delegate, its committed outcome and admission',
          params: DelegateParams,
          response: { 200: Delegate, 404: ErrorResponse },
        },
      },
      async (req) => {
        assertAgentAccess(req, req.params.agentId);
        const d = await getDelegate(pool, req.params.agentId, req.params.delegateId);
        if (!d) throw notFound(`delegate ${req.params.delegateId}`);
        return d;
      },
    );

    app.post(
      '/v1/agents/:agentId/delegates/:delegateId/cancel',
      {
        schema: {
          tags: ['delegates'],
          summary: 'Cancel a running delegate; the reason is kept in its outcome',
          params: DelegateParams,
          body: z.object({ reason: storableString().min(1).max(1000) }).strict(),
          response: {
            202: z.object({ delegateId: z.string(), status: z.literal('cancelling') }),
            404: ErrorResponse,
            409: ErrorResponse,
          },
        },
      },
      async (req, reply) => {
        assertAgentAccess(req, req.params.agentId);
        const d = await getDelegate(pool, req.params.agentId, req.params.delegateId);
        if (!d) throw notFound(`delegate ${req.params.delegateId}`);
        if (d.outcome)
          throw new ApiError(409, 'delegate_finished', `delegate ${d.delegateId} already finished (${d.outcome.kind})`);
        try {
          await temporal.workflow
            .getHandle(delegateWorkflowId(req.params.agentId, d.delegateId))
            .signal(cancelDelegate, { reason: req.body.reason });
        } catch (err) {
          // It finished between the read and the signal: its workflow is closed.
          if (err instanceof WorkflowNotFoundError)
            throw new ApiError(409, 'delegate_finished', `delegate ${d.delegateId} already finished`);
          throw err;
        }
        return reply.status(202).send({ delegateId: d.delegateId, status: 'cancelling' as const });
      },
    );
  };
}
