import type { Client } from '@temporalio/client';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { decideApproval } from '../../contracts/routine-run';
import { getApp } from '../../db/apps';
import type { Pool } from '../../db/pool';
import { getArtifact, getRoutine, getRun, listRuns, listTools, type RoutineRunRow } from '../../db/routines';
import { playbookOutcome, RoutineDefinition, RUN_STATUSES } from '../../domain/routines';
import { conversationWorkflowId, routineConversationId } from '../../domain/ids';
import { listMessages } from '../../db/conversations';
import { storableString } from '../../domain/text';
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
import { assertAgentAccess } from '../auth';
import { sendDecision } from '../decisions';
import { ApiError, notFound } from '../errors';
import { decodeCursor, Page, PageQuery, pageOf } from '../pagination';
import { ErrorResponse, Id } from '../schemas';

const AppParams = z.object({ agentId: Id, appId: Id });
const RoutineParams = AppParams.extend({ slug: Id });
const RunParams = z.object({ agentId: Id, runId: z.string().uuid() });
const ArtifactParams = AppParams.extend({
  artifactId: z.string().regex(/^art_[0-9a-f]{8}$/, 'an artifact id (art_ and 8 hex digits)'),
});

const Routine = z.object({
  appId: z.string(),
  slug: z.string(),
  label: z.string(),
  schedule: z.object({ expr: z.string(), tz: z.string().optional() }),
  cron: z.string(),
  prompt: z.string().nullable(),
  playbook: z.string().nullable(),
  delivery: z.unknown().nullable(),
  /** The routine's own budget for each run, in USD (null: the agent's perRoutineRunUsd). */
  budgetUsd: z.number().nullable(),
  status: z.enum(['active', 'paused']),
  nextRunAt: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export const Gate = z.object({ capability: z.string(), detail: z.string() });
const Run = z.object({
  runId: z.string(),
  /** The run's workflow in the Temporal UI (routine:<agentId>:<appId>:<slug>-<fire time>). */
  workflowId: z.string(),
  status: z.enum(RUN_STATUSES),
  digest: z.string().nullable(),
  sessionId: z.string(),
  gate: Gate.optional(),
  artifactId: z.string().optional(),
  firedAt: z.string(),
  finishedAt: z.string().nullable(),
  prompt: z.string().nullable(),
  tool: z.object({ name: z.string(), version: z.number(), authored: z.boolean() }).nullable(),
  decision: z.object({ approved: z.boolean(), note: z.string().optional(), at: z.string() }).nullable(),
  /** The playbook log's word for the run: success, partial (waiting for approval) or aborted. */
  playbook: z.enum(['success', 'partial', 'aborted']).nullable(),
});
const Tool = z.object({
  name: z.string(),
  version: z.number(),
  title: z.string(),
  purpose: z.string(),
  inputs: z.array(z.string()),
  code: z.string(),
  authoredBy: z.string(),
  createdAt: z.string(),
});
const Artifact = z.object({
  artifactId: z.string(),
  runId: z.string(),
  producedBy: z.string(),
  number: z.number(),
  title: z.string(),
  content: z.string(),
  createdAt: z.string(),
});
const Decision = z.object({ note: storableString().max(2000).optional() }).strict();
const errors = { 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse };

const routineView = ({ agentId: _agentId, ...r }: RoutineView) => r;

/** The route of a person's decision on a run waiting for approval (the approvals list hands out its path). */
export const routineRunDecisionRoute = (verdict: 'approve' | 'reject') =>
  `/v1/agents/:agentId/routine-runs/:runId/${verdict}` as const;

function runView(r: RoutineRunRow): z.infer<typeof Run> {
  return {
    runId: r.runId,
    workflowId: r.workflowId,
    status: r.status,
    digest: r.digest,
    sessionId: r.sessionId,
    ...(r.gate ? { gate: r.gate } : {}),
    ...(r.artifactId ? { artifactId: r.artifactId } : {}),
    firedAt: r.firedAt,
    finishedAt: r.finishedAt,
    prompt: r.prompt,
    tool: r.toolName ? { name: r.toolName, version: r.toolVersion ?? 0, authored: r.authored } : null,
    decision: r.decision,
    playbook: playbookOutcome(r.status),
  };
}

function unwrap<T>(r: RoutineResult<T>): T {
  if (r.ok) return r.value;
  throw new ApiError(r.error.status, r.error.code, r.error.message);
}

export function routineRoutes(deps: {
  pool: Pool;
  temporal: Client;
  taskQueue: string;
  floorMs: number;
  temporalDeadlineMs: number;
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
        assertAgentAccess(req, agentId);
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
        assertAgentAccess(req, agentId);
        const { limit } = req.query;
        const after = decodeCursor(req.query.cursor, z.tuple([Id]));
        if (!(await getApp(pool, agentId, appId))) throw notFound(`app ${appId}`);
        const page = { ...(after ? { after: after[0] } : {}), limit: limit + 1 };
        const routines = await listRoutineViews(pool, temporal, agentId, appId, page);
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
        assertAgentAccess(req, agentId);
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
        assertAgentAccess(req, agentId);
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
        assertAgentAccess(req, agentId);
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
        assertAgentAccess(req, agentId);
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
        assertAgentAccess(req, agentId);
        unwrap(await runRoutineNow(pool, temporal, agentId, appId, slug));
        return reply.status(202).send({ slug, status: 'triggered' as const });
      },
    );

    app.get(
      `${base}/runs`,
      {
        schema: {
          tags: ['routines'],
          summary: "A routine's runs, newest first",
          params: RoutineParams,
          response: { 200: z.array(Run), 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, appId, slug } = req.params;
        assertAgentAccess(req, agentId);
        if (!(await getRoutine(pool, agentId, appId, slug))) throw notFound(`routine ${slug} of app ${appId}`);
        return (await listRuns(pool, agentId, appId, slug)).map(runView);
      },
    );

    app.get(
      `${base}/transcript`,
      {
        schema: {
          tags: ['routines'],
          summary: "The routine's transcript (its sessionId): each run's prompt and digest",
          params: RoutineParams,
          response: {
            200: z.object({
              sessionId: z.string(),
              messages: z.array(
                z.object({
                  seq: z.number(),
                  role: z.string(),
                  text: z.string(),
                  at: z.string(),
                  turnId: z.string().nullable(),
                }),
              ),
            }),
            404: ErrorResponse,
          },
        },
      },
      async (req) => {
        const { agentId, appId, slug } = req.params;
        assertAgentAccess(req, agentId);
        if (!(await getRoutine(pool, agentId, appId, slug))) throw notFound(`routine ${slug} of app ${appId}`);
        const sessionId = routineConversationId(appId, slug);
        return { sessionId, messages: await listMessages(pool, conversationWorkflowId(agentId, sessionId), 0, 1000) };
      },
    );

    app.get(
      '/v1/agents/:agentId/routine-runs/:runId',
      {
        schema: {
          tags: ['routines'],
          summary: 'A routine run',
          params: RunParams,
          response: { 200: Run, 404: ErrorResponse },
        },
      },
      async (req) => {
        assertAgentAccess(req, req.params.agentId);
        const run = await getRun(pool, req.params.runId);
        if (!run || run.agentId !== req.params.agentId) throw notFound(`routine run ${req.params.runId}`);
        return runView(run);
      },
    );

    for (const verdict of ['approve', 'reject'] as const) {
      app.post(
        routineRunDecisionRoute(verdict),
        {
          schema: {
            tags: ['routines'],
            summary:
              verdict === 'approve'
                ? 'Approve the gated action of a run waiting for approval; the run resumes'
                : 'Reject the gated action; the run ends rejected and nothing is sent',
            params: RunParams,
            body: Decision.nullish(),
            response: { 202: z.object({ runId: z.string(), decision: z.enum(['approved', 'rejected']) }), ...errors },
          },
        },
        async (req, reply) => {
          const { agentId, runId } = req.params;
          assertAgentAccess(req, agentId);
          const run = await getRun(pool, runId);
          if (!run || run.agentId !== agentId) throw notFound(`routine run ${runId}`);
          if (run.status !== 'needs_approval')
            throw new ApiError(409, 'not_awaiting_approval', `run ${runId} is ${run.status}, not waiting for approval`);
          const handle = temporal.workflow.getHandle(run.workflowId, undefined, { firstExecutionRunId: runId });
          const decision = { approved: verdict === 'approve', ...(req.body?.note ? { note: req.body.note } : {}) };
          await sendDecision(
            temporal,
            deps.temporalDeadlineMs,
            () => handle.executeUpdate(decideApproval, { args: [decision] }),
            `run ${runId} is not waiting for approval`,
            {
              pool,
              entry: {
                agentId,
                action: verdict === 'approve' ? 'routine_run.approve' : 'routine_run.reject',
                actor: req.actor,
                subject: runId,
                detail: decision.note ? { note: decision.note } : undefined,
              },
            },
          );
          return reply
            .status(202)
            .send({ runId, decision: verdict === 'approve' ? ('approved' as const) : ('rejected' as const) });
        },
      );
    }

    app.get(
      '/v1/agents/:agentId/apps/:appId/tools',
      {
        schema: {
          tags: ['routines'],
          summary: "The app's saved tools (latest version of each)",
          params: AppParams,
          response: { 200: z.array(Tool), 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, appId } = req.params;
        assertAgentAccess(req, agentId);
        if (!(await getApp(pool, agentId, appId))) throw notFound(`app ${appId}`);
        return (await listTools(pool, agentId, appId)).map(({ authoredInRun: _run, ...t }) => t);
      },
    );

    app.get(
      '/v1/agents/:agentId/apps/:appId/artifacts/:artifactId',
      {
        schema: {
          tags: ['routines'],
          summary: 'A run artifact (Markdown)',
          params: ArtifactParams,
          response: { 200: Artifact, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, appId, artifactId } = req.params;
        assertAgentAccess(req, agentId);
        const a = await getArtifact(pool, agentId, appId, artifactId);
        if (!a) throw notFound(`artifact ${artifactId}`);
        return a;
      },
    );
  };
}
