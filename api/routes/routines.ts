import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { RoutineDefinition } from '../../domain/routines';
import {
  deleteRoutine,
  getRoutineView,
  listRoutineViews,
  pauseRoutine,
  putRoutine,
  resumeRoutine,
  runRoutineNow,
  type RoutineResult,
  type RoutineView,
} from '../../services/routines';
import { ApiError, notFound } from '../errors';
import { decodeCursor, Page, PageQuery, pageOf } from '../pagination';
import { ErrorResponse, Id } from '../schemas';
import { AppParams } from './apps';
import { DeliveryShown, shownDelivery } from '../delivery-shown';

/** A routine's path parameters, which the routes of its runs share. */
export const RoutineParams = AppParams.extend({ slug: Id });

const Routine = z.object({
  appId: z.string(),
  slug: z.string(),
  label: z.string(),
  schedule: z.object({ expr: z.string(), tz: z.string().optional() }),
  cron: z.string(),
  prompt: z.string().nullable(),
  playbook: z.string().nullable(),
  delivery: DeliveryShown.nullable(),
  /** The routine's own budget for each run, in USD (null: the agent's perRoutineRunUsd). */
  budgetUsd: z.number().nullable(),
  status: z.enum(['active', 'paused']),
  nextRunAt: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
/** What a run waiting for approval would do: its runs and the approvals list show it. */
export const Gate = z.object({ capability: z.string(), detail: z.string() });
/** The route of a person's decision on a run waiting for approval (the approvals list hands out its path). */
export const routineRunDecisionRoute = (verdict: 'approve' | 'reject') =>
  `/v1/agents/:agentId/routine-runs/:runId/${verdict}` as const;
const errors = { 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse };

const routineView = ({ agentId: _agentId, ...r }: RoutineView) => ({
  ...r,
  delivery: r.delivery && shownDelivery(r.delivery),
});

/** A routine refusal in the API's error shape and status. */
export function unwrap<T>(r: RoutineResult<T>): T {
  if (r.ok) return r.value;
  throw new ApiError(r.error.status, r.error.code, r.error.message);
}

/** An app's routines: each a row and a Temporal Schedule, created, edited, paused, resumed, run now and deleted. */
export function routineRoutes(deps: {
  pool: Pool;
  temporal: Client;
  taskQueue: string;
  floorMs: number;
}): FastifyPluginAsyncZod {
  const { pool, temporal } = deps;
  return async (app) => {
    const base = '/v1/agents/:agentId/apps/:appId/routines/:slug';

    app.put(
      base,
      {
        schema: {
          tags: ['routines'],
          summary:
            'Create or edit a routine (row and Temporal Schedule together; an edit keeps its paused or active status)',
          params: RoutineParams,
          body: RoutineDefinition,
          response: { 200: Routine, 201: Routine, ...errors },
        },
      },
      async (req, reply) => {
        const { agentId, appId, slug } = req.params;
        const { routine, created } = unwrap(await putRoutine(pool, temporal, deps, agentId, appId, slug, req.body));
        return reply.status(created ? 201 : 200).send(routineView(routine));
      },
    );

    app.get(
      '/v1/agents/:agentId/apps/:appId/routines',
      {
        schema: {
          tags: ['routines'],
          summary: "The app's routines by slug, each with its next fire",
          params: AppParams,
          querystring: PageQuery.strict(),
          response: { 200: Page(Routine), 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, appId } = req.params;
        const { limit } = req.query;
        const after = decodeCursor(req.query.cursor, z.tuple([Id]));
        const page = { ...(after ? { after: after[0] } : {}), limit: limit + 1 };
        const routines = unwrap(await listRoutineViews(pool, temporal, agentId, appId, page));
        return pageOf(routines, limit, (r) => [r.slug], routineView);
      },
    );

    app.get(
      base,
      {
        schema: {
          tags: ['routines'],
          summary: 'A routine, with its next fire',
          params: RoutineParams,
          response: { 200: Routine, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, appId, slug } = req.params;
        const r = await getRoutineView(pool, temporal, agentId, appId, slug);
        if (!r) throw notFound(`routine ${slug} of app ${appId}`);
        return routineView(r);
      },
    );

    app.delete(
      base,
      {
        schema: {
          tags: ['routines'],
          summary: 'Delete a routine and its Schedule',
          params: RoutineParams,
          response: { 200: z.object({ slug: z.string(), deleted: z.literal(true) }), ...errors },
        },
      },
      async (req) => {
        const { agentId, appId, slug } = req.params;
        unwrap(await deleteRoutine(pool, temporal, agentId, appId, slug));
        return { slug, deleted: true as const };
      },
    );

    app.post(
      `${base}/pause`,
      {
        schema: {
          tags: ['routines'],
          summary: 'Pause (routine and Schedule)',
          params: RoutineParams,
          response: { 200: Routine, ...errors },
        },
      },
      async (req) => {
        const { agentId, appId, slug } = req.params;
        return routineView(unwrap(await pauseRoutine(pool, temporal, agentId, appId, slug, 'api')));
      },
    );

    app.post(
      `${base}/resume`,
      {
        schema: {
          tags: ['routines'],
          summary: 'Resume (routine and Schedule)',
          params: RoutineParams,
          response: { 200: Routine, ...errors },
        },
      },
      async (req) => {
        const { agentId, appId, slug } = req.params;
        return routineView(unwrap(await resumeRoutine(pool, temporal, agentId, appId, slug, 'api')));
      },
    );

    app.post(
      `${base}/run`,
      {
        schema: {
          tags: ['routines'],
          summary: 'Run now (409 when paused or a run is in flight)',
          params: RoutineParams,
          response: { 202: z.object({ slug: z.string(), status: z.literal('triggered') }), ...errors },
        },
      },
      async (req, reply) => {
        const { agentId, appId, slug } = req.params;
        unwrap(await runRoutineNow(pool, temporal, deps, agentId, appId, slug));
        return reply.status(202).send({ slug, status: 'triggered' as const });
      },
    );
  };
}
