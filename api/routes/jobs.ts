import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { DeliveryShown, shownDelivery } from '../delivery-shown';
import type { EgressAllow } from '../../domain/egress';
import { NewJob } from '../../domain/jobs';
import type { JobSettings } from '../../services/job-settings';
import {
  createJob,
  deleteJob,
  getJob,
  listJobRuns,
  listJobs,
  pauseJob,
  resumeJob,
  runJobNow,
  type JobResult,
  type JobRow,
} from '../../services/jobs';
import { assertReachable } from '../egress-check';
import { ApiError, notFound } from '../errors';
import { AgentParams, ErrorResponse } from '../schemas';

const JobParams = z.object({ agentId: AgentParams.shape.agentId, id: z.string().uuid() });
const Job = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  status: z.enum(['active', 'paused', 'completed', 'failed']),
  schedule: z.unknown(),
  task: z.string(),
  /** As it was given: a Delivery, or the name of one of the agent's destinations. */
  delivery: z.union([DeliveryShown, z.string()]),
  /** Who chose where results go: a person (`user`, through the API) or the model (`agent`, its schedule tool). */
  deliveryChosenBy: z.enum(['agent', 'user']),
  deleteAfterRun: z.boolean(),
  /** The job's own budget for each run, in USD (null: the agent's perJobRunUsd). */
  budgetUsd: z.number().nullable(),
  createdBy: z.enum(['agent', 'user']),
  nextRunAt: z.string().nullable(),
  runCount: z.number(),
  consecutiveErrors: z.number(),
  lastRun: z.unknown().nullable(),
  createdAt: z.string(),
});
const Run = z.object({
  runId: z.string().describe("Also the run's workflow id (the Temporal UI shows its history)"),
  firedAt: z.string(),
  startedAt: z.string(),
  finishedAt: z.string().nullable(),
  durationMs: z.number().nullable().describe('finishedAt - startedAt; null while the run goes on'),
  status: z.enum(['running', 'ok', 'error', 'skipped']),
  reply: z.string().optional(),
  error: z.string().optional(),
  delivery: z.object({ outcome: z.string().nullable(), attempts: z.number() }),
  /** Waiting, still running, for a budget to be raised: the budget's words (docs/spend.md). */
  budgetBlocked: z.string().optional(),
});
const errors = { 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse, 413: ErrorResponse, 429: ErrorResponse };

const view = ({ agentId: _agentId, destination, delivery, ...job }: JobRow) => ({
  ...job,
  delivery: destination ?? shownDelivery(delivery),
});

/** A job rule or lifecycle refusal in the API's error shape and status. */
function unwrap<T>(r: JobResult<T>): T {
  if (r.ok) return r.value;
  const e = r.error;
  throw new ApiError(e.status, e.code, e.message, 'field' in e ? { field: e.field } : undefined);
}

export function jobRoutes(deps: {
  pool: Pool;
  temporal: Client;
  jobs: JobSettings;
  egressAllow: EgressAllow;
}): FastifyPluginAsyncZod {
  const { pool, temporal, egressAllow } = deps;
  return async (app) => {
    app.post(
      '/v1/agents/:agentId/jobs',
      {
        schema: {
          tags: ['jobs'],
          summary: 'Create a scheduled job (row and Temporal Schedule together)',
          params: AgentParams,
          body: NewJob,
          response: { 201: Job, ...errors },
        },
      },
      async (req, reply) => {
        const { delivery } = req.body;
        if (typeof delivery === 'object') assertReachable([['delivery', delivery]], egressAllow);
        return reply
          .status(201)
          .send(view(unwrap(await createJob(pool, temporal, deps.jobs, req.params.agentId, req.body, 'user'))));
      },
    );

    app.get(
      '/v1/agents/:agentId/jobs',
      { schema: { tags: ['jobs'], summary: "The agent's jobs", params: AgentParams, response: { 200: z.array(Job) } } },
      async (req) => {
        return (await listJobs(pool, req.params.agentId)).map(view);
      },
    );

    app.get(
      '/v1/agents/:agentId/jobs/:id',
      { schema: { tags: ['jobs'], summary: 'A job', params: JobParams, response: { 200: Job, 404: ErrorResponse } } },
      async (req) => {
        const job = await getJob(pool, req.params.agentId, req.params.id);
        if (!job) throw notFound(`job ${req.params.id}`);
        return view(job);
      },
    );

    app.get(
      '/v1/agents/:agentId/jobs/:id/runs',
      {
        schema: {
          tags: ['jobs'],
          summary: "A job's runs, skipped fires included",
          params: JobParams,
          response: { 200: z.array(Run), 404: ErrorResponse },
        },
      },
      async (req) => {
        return unwrap(await listJobRuns(pool, req.params.agentId, req.params.id));
      },
    );

    const actor = 'api';
    app.post(
      '/v1/agents/:agentId/jobs/:id/pause',
      {
        schema: {
          tags: ['jobs'],
          summary: 'Pause (row and Schedule)',
          params: JobParams,
          response: { 200: Job, ...errors },
        },
      },
      async (req) => {
        return view(unwrap(await pauseJob(pool, temporal, req.params.agentId, req.params.id, actor)));
      },
    );
    app.post(
      '/v1/agents/:agentId/jobs/:id/resume',
      {
        schema: {
          tags: ['jobs'],
          summary: 'Resume (recomputes the next run, resets errors)',
          params: JobParams,
          response: { 200: Job, ...errors },
        },
      },
      async (req) => {
        return view(unwrap(await resumeJob(pool, temporal, req.params.agentId, req.params.id, actor)));
      },
    );
    app.post(
      '/v1/agents/:agentId/jobs/:id/run',
      {
        schema: {
          tags: ['jobs'],
          summary: 'Run now (409 unless active)',
          params: JobParams,
          response: { 202: z.object({ id: z.string(), status: z.literal('triggered') }), ...errors },
        },
      },
      async (req, reply) => {
        const job = unwrap(await runJobNow(pool, temporal, deps.jobs, req.params.agentId, req.params.id, actor));
        return reply.status(202).send({ id: job.id, status: 'triggered' as const });
      },
    );
    app.delete(
      '/v1/agents/:agentId/jobs/:id',
      {
        schema: {
          tags: ['jobs'],
          summary: 'Delete (row and Schedule)',
          params: JobParams,
          response: { 200: z.object({ id: z.string(), deleted: z.literal(true) }), ...errors },
        },
      },
      async (req) => {
        const { id } = unwrap(await deleteJob(pool, temporal, req.params.agentId, req.params.id, actor));
        return { id, deleted: true as const };
      },
    );
  };
}
