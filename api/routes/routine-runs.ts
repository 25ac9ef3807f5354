import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { runDurationMs } from '../../domain/run-duration';
import { playbookOutcome, RUN_STATUSES } from '../../domain/routines';
import { storableString } from '../../domain/text';
import {
  decideOnRoutineRun,
  getRoutineRun,
  listRoutineRuns,
  routineTranscript,
  type RoutineRunRow,
} from '../../services/routines';
import { decisionNotTaken, type DecisionRouteDeps } from '../decisions';
import { notFound } from '../errors';
import { ErrorResponse, Id } from '../schemas';
import { Gate, RoutineParams, routineRunDecisionRoute, unwrap } from './routines';

const RunParams = z.object({ agentId: Id, runId: z.string().uuid() });
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
  startedAt: z.string(),
  finishedAt: z.string().nullable(),
  durationMs: z.number().nullable().describe('finishedAt - startedAt; null while the run goes on'),
  prompt: z.string().nullable(),
  tool: z.object({ name: z.string(), version: z.number(), authored: z.boolean() }).nullable(),
  decision: z.object({ approved: z.boolean(), note: z.string().optional(), at: z.string() }).nullable(),
  /** The playbook log's word for the run: success, partial (waiting for approval) or aborted. */
  playbook: z.enum(['success', 'partial', 'aborted']).nullable(),
});
const Decision = z.object({ note: storableString().max(2000).optional() }).strict();
const errors = { 400: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse };

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
    startedAt: r.startedAt,
    finishedAt: r.finishedAt,
    durationMs: runDurationMs(r.startedAt, r.finishedAt),
    prompt: r.prompt,
    tool: r.toolName ? { name: r.toolName, version: r.toolVersion ?? 0, authored: r.authored } : null,
    decision: r.decision,
    playbook: playbookOutcome(r.status),
  };
}

/** A routine's runs and transcript, one run, and a person's decision on a run waiting for approval. */
export function routineRunRoutes(deps: DecisionRouteDeps): FastifyPluginAsyncZod {
  const { pool, temporal } = deps;
  return async (app) => {
    const base = '/v1/agents/:agentId/apps/:appId/routines/:slug';

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
        return unwrap(await listRoutineRuns(pool, agentId, appId, slug)).map(runView);
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
        return unwrap(await routineTranscript(pool, agentId, appId, slug));
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
        const run = await getRoutineRun(pool, req.params.agentId, req.params.runId);
        if (!run) throw notFound(`routine run ${req.params.runId}`);
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
          const answer = unwrap(
            await decideOnRoutineRun(pool, temporal, deps.temporalDeadlineMs, {
              agentId,
              runId,
              approved: verdict === 'approve',
              note: req.body?.note,
              actor: req.actor,
            }),
          );
          if (answer !== 'taken') throw decisionNotTaken(answer, `run ${runId} is not waiting for approval`);
          return reply
            .status(202)
            .send({ runId, decision: verdict === 'approve' ? ('approved' as const) : ('rejected' as const) });
        },
      );
    }
  };
}
