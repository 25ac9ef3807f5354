import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { NewTask, TASK_STATUSES } from '../../domain/delegation';
import { createTask, listTasks, moveTaskOnBoard, taskWithAttempts } from '../../services/tasks';
import { ApiError, notFound } from '../errors';
import { decodeCursor, Page, PageQuery, pageOf } from '../pagination';
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
  toolServers: z.array(z.string()).nullable().describe('The tool servers its delegate may use; null: all'),
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

/** An agent's task board: creating tasks, reading them with their attempts, and a person's moves. */
export function taskRoutes(pool: Pool): FastifyPluginAsyncZod {
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
        const task = await taskWithAttempts(pool, req.params.agentId, req.params.number);
        if (!task) throw notFound(`task #${req.params.number}`);
        return task;
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
        const { agentId, number } = req.params;
        const moved = await moveTaskOnBoard(pool, agentId, number, req.body.status, req.actor);
        if (moved.ok) return moved.task;
        if (moved.reason === 'not_found') throw notFound(`task #${req.params.number}`);
        throw new ApiError(
          409,
          'invalid_transition',
          `task #${req.params.number} cannot move from ${moved.from} to ${req.body.status}`,
        );
      },
    );
  };
}
