import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { isGrpcServiceError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { temporal as proto } from '@temporalio/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { fetchHistory, historyJson, recordRunAction, replayOnWorker } from '../../services/run-history';
import { ApiError, notFound } from '../errors';
import { ErrorResponse } from '../schemas';
import { LIMITS } from '../../domain/limits';
import { storableString } from '../../domain/text';

const RunParams = z.object({ workflowId: z.string().min(1).max(LIMITS.workflowIdChars) });
const RunQuery = z.object({ runId: z.string().uuid().optional() });
const errors = { 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse, 503: ErrorResponse };
const EventType = proto.api.enums.v1.EventType;

async function history(client: Client, workflowId: string, runId?: string) {
  try {
    return await fetchHistory(client, workflowId, runId);
  } catch (err) {
    // fetchHistory fails with the bare gRPC error, describe with WorkflowNotFoundError.
    if (err instanceof WorkflowNotFoundError || (isGrpcServiceError(err) && err.code === status.NOT_FOUND))
      throw notFound(`workflow ${workflowId}`);
    throw err;
  }
}

export function runRoutes(deps: {
  pool: Pool;
  temporal: Client;
  namespace: string;
  taskQueue: string;
}): FastifyPluginAsyncZod {
  const { temporal } = deps;

  return async (app) => {
    app.get(
      '/v1/runs/:workflowId/history',
      {
        schema: {
          tags: ['runs'],
          summary:
            'The history of a run as JSON (the shape `temporal workflow show -o json` prints); ' +
            'the latest run unless runId',
          params: RunParams,
          querystring: RunQuery,
          response: { 200: z.object({ events: z.array(z.record(z.string(), z.unknown())) }), ...errors },
        },
      },
      async (req) => {
        const h = await history(temporal, req.params.workflowId, req.query.runId);
        return JSON.parse(historyJson.stringify(h.history)) as { events: Record<string, unknown>[] };
      },
    );

    app.post(
      '/v1/runs/:workflowId/replay',
      {
        schema: {
          tags: ['runs'],
          summary: "Replays the run's history against the workflow code the workers run (a worker replays it)",
          params: RunParams,
          querystring: RunQuery,
          response: { 200: z.object({ ok: z.boolean(), runId: z.string(), error: z.string().optional() }), ...errors },
        },
      },
      async (req) => {
        const h = await history(temporal, req.params.workflowId, req.query.runId);
        const outcome = await replayOnWorker(temporal, deps.taskQueue, { workflowId: h.workflowId, runId: h.runId! });
        if (!outcome)
          throw new ApiError(503, 'unavailable', 'no Keel worker replayed the run in time; is one running?');
        const detail = { runId: outcome.runId, ok: outcome.ok };
        await recordRunAction(deps.pool, h, { actor: req.actor, action: 'run.replay', detail });
        return { ok: outcome.ok, runId: outcome.runId, ...(outcome.error ? { error: outcome.error } : {}) };
      },
    );

    app.post(
      '/v1/runs/:workflowId/reset',
      {
        schema: {
          tags: ['runs'],
          summary:
            'Resets a run to its first or last completed workflow task (after a fix); the new run continues from there',
          params: RunParams,
          querystring: RunQuery,
          body: z
            .object({
              to: z.enum(['last-workflow-task', 'first-workflow-task']),
              // Temporal takes it, then the audit trail's jsonb: a NUL there failed after the reset was done.
              reason: storableString().min(1).max(1000),
            })
            .strict(),
          response: { 200: z.object({ newRunId: z.string(), resetToEventId: z.number() }), ...errors },
        },
      },
      async (req) => {
        const h = await history(temporal, req.params.workflowId, req.query.runId);
        const completed = (h.history.events ?? []).filter(
          (e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        );
        const target = req.body.to === 'first-workflow-task' ? completed[0] : completed.at(-1);
        if (!target?.eventId)
          throw new ApiError(409, 'not_resettable', `run ${h.runId} has no completed workflow task to reset to`);
        const { runId } = await temporal.workflowService
          .resetWorkflowExecution({
            namespace: deps.namespace,
            workflowExecution: { workflowId: req.params.workflowId, runId: h.runId },
            reason: req.body.reason,
            workflowTaskFinishEventId: target.eventId,
            requestId: randomUUID(),
          })
          .catch((err: unknown) => {
            // Temporal's refusals in the API's words: the run cannot be reset as asked.
            if (
              isGrpcServiceError(err) &&
              (err.code === status.INVALID_ARGUMENT || err.code === status.FAILED_PRECONDITION)
            ) {
              throw new ApiError(409, 'not_resettable', `Temporal refused the reset: ${err.details}`);
            }
            if (isGrpcServiceError(err) && err.code === status.NOT_FOUND)
              throw notFound(`run ${h.runId} of ${req.params.workflowId}`);
            throw err;
          });
        const { to, reason } = req.body;
        const detail = { runId: h.runId, newRunId: runId ?? '', to, reason };
        await recordRunAction(deps.pool, h, { actor: req.actor, action: 'run.reset', detail });
        return { newRunId: runId ?? '', resetToEventId: Number(target.eventId) };
      },
    );
  };
}
