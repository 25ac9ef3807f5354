import { randomUUID } from 'node:crypto';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { Client } from '@temporalio/client';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../db/pool';
import type { EgressAllow } from '../domain/egress';
import type { ToolCommands } from '../domain/tool-servers';
import { LIMITS } from '../domain/limits';
import { registerAuth } from './auth';
import { RequestLog } from './request-log';
import { operationIdOf } from './operation-id';
import { registerSecretSealing } from './secret-sealing';
import { registerDeletionGuard } from './deletion-guard';
import { CONSOLE_DIST, consoleRoutes } from './console';
import { ErrorResponse } from './schemas';
import { errorBody, handleError, handleRouterError, shuttingDown } from './errors';
import { createMetrics } from './metrics';
import { EventHub } from './events';
import { eventRoutes } from './routes/events';
import { agentRoutes } from './routes/agents';
import { auditRoutes } from './routes/audit';
import { approvalRoutes } from './routes/approvals';
import { spendRoutes } from './routes/spend';
import { conversationRoutes } from './routes/conversations';
import { deletionRoutes } from './routes/deletions';
import { evalRoutes } from './routes/evals';
import { appRoutes } from './routes/apps';
import { taskRoutes } from './routes/tasks';
import { skillRoutes } from './routes/skills';
import { delegateRoutes } from './routes/delegates';
import { jobRoutes } from './routes/jobs';
import { routineRoutes } from './routes/routines';
import { routineRunRoutes } from './routes/routine-runs';
import { routineToolRoutes } from './routes/routine-tools';
import { artifactRoutes } from './routes/artifacts';
import { memoryRoutes } from './routes/memory';
import { proposalRoutes } from './routes/proposals';
import { runRoutes } from './routes/runs';
import { codecRoutes } from './routes/codec';
import { toolCallRoutes } from './routes/tool-calls';
import { toolServerRoutes } from './routes/tool-servers';
import { apiToolServerDeps } from '../services/tool-servers';
import { secretBoxOf } from '../services/secrets';
import { DEFAULT_ROUTINE_SETTINGS, type RoutineSettings } from '../domain/routines';
import { DEFAULT_JOB_SETTINGS, type JobSettings } from '../services/job-settings';

export interface ApiDeps {
  pool: Pool;
  temporal: Client;
  taskQueue: string;
  tokens: Map<string, string> | undefined;
  /** Fastify's request log (pino): off, or at a level, to stdout or the given stream. */
  logger?: boolean | { level: string; stream?: { write(line: string): void } };
  /** How long a conversation's workflow stays open idle (KEEL_CONVERSATION_IDLE_MS); the default when unset. */
  conversationIdleMs?: number;
  /** How long a submission may wait for Temporal and a worker before the API answers 503. */
  temporalDeadlineMs?: number;
  jobs?: Omit<JobSettings, 'taskQueue'>;
  routines?: Pick<RoutineSettings, 'floorMs'>;
  /** Where a worker serves the Temporal SDK's own Prometheus metrics, appended to /metrics. */
  workerMetricsUrl?: string;
  /** The Temporal Web UI's base URL (KEEL_TEMPORAL_UI_URL), for the console's links to runs; null or unset: none. */
  temporalUiUrl?: string | null;
  /** The egress guard's allow list (KEEL_EGRESS_ALLOW), which configured webhook URLs are checked against. */
  egressAllow: EgressAllow;
  /** Keys that seal secrets at rest (KEEL_SECRETS_KEY); unset: a tool server's or webhook's secret is refused. */
  secretsKey?: string;
  /** The commands a stdio tool server may run (KEEL_TOOL_COMMANDS); DEFAULT_TOOL_COMMANDS when unset. */
  toolCommands?: ToolCommands;
  /** Where the built console is (console/dist unless a test says otherwise). */
  consoleDir?: string;
}

/**
 * What the request log never prints, whatever a serializer or a debug line adds: the bearer token, the codec's cookie
 * and the cookie the codec session sets. Bodies are not logged at all (webhook and tool-server secrets travel there).
 */
const LOG_REDACTIONS = ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'];

const COMMON_ERRORS = {
  400: ErrorResponse,
  401: ErrorResponse,
  403: ErrorResponse,
  404: ErrorResponse,
  405: ErrorResponse,
  413: ErrorResponse,
  414: ErrorResponse,
  503: ErrorResponse,
};

/** The REST API of API.md: fastify, zod-validated, OpenAPI at /docs. It never runs model calls. */
export async function buildApi(deps: ApiDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: deps.logger ? { ...(deps.logger === true ? {} : deps.logger), redact: LOG_REDACTIONS } : false,
    bodyLimit: LIMITS.requestBodyBytes,
    // Long enough for any id the schemas accept (workflow ids hold two ids), so the schemas, not the router, judge.
    routerOptions: { maxParamLength: LIMITS.pathParamChars },
    frameworkErrors: handleRouterError,
    // While the API closes, a request is refused by the hook below in Keel's error shape, not by fastify's own body.
    return503OnClosing: false,
    logController: new RequestLog(),
    // A 500 names its request id: a UUID, so that the id is one line of one API's log, whichever of a cluster's.
    genReqId: () => randomUUID(),
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler(handleError);
  // preClose runs as close() begins, before fastify waits for the requests in flight: new requests are refused from
  // then on, and a submission waiting for its turn stops waiting (see conversationRoutes), so none is cut off.
  const closing = new AbortController();
  app.addHook('preClose', async () => closing.abort());
  app.addHook('onRequest', async () => {
    if (closing.signal.aborted) throw shuttingDown();
  });
  // An answer given while closing also closes its connection: Node's close() ends only the connections idle when it
  // is called, and would otherwise wait out the keep-alive timeout (72 s) of each one that goes idle later.
  app.addHook('onSend', async (_req, reply) => {
    if (closing.signal.aborted) void reply.header('connection', 'close');
  });
  // Every route documents the errors any route can answer (bad input, auth, too large, a dependency down), and a
  // known path asked with another method answers 405 with Allow, not 404.
  const routes: { pattern: RegExp; methods: Set<string> }[] = [];
  const operationIds = new Set<string>();
  app.addHook('onRoute', (route) => {
    if (route.schema && !route.schema.hide) {
      route.schema.response = { ...COMMON_ERRORS, ...(route.schema.response as Record<number, unknown> | undefined) };
      // HEAD routes are GET's twins (fastify adds them, the document leaves them out): they share its schema.
      if (route.method !== 'HEAD') {
        const id = route.schema.operationId ?? operationIdOf(String(route.method), route.url);
        if (operationIds.has(id)) throw new Error(`two operations of the API are named ${id}: name one in its schema`);
        operationIds.add(id);
        route.schema.operationId = id;
      }
    }
    const pattern = new RegExp(`^${route.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z]+/g, '[^/]+')}$`);
    const known =
      routes.find((r) => r.pattern.source === pattern.source) ??
      routes[routes.push({ pattern, methods: new Set() }) - 1]!;
    for (const m of [route.method].flat()) known.methods.add(m);
  });
  const noRoute = (req: FastifyRequest, reply: FastifyReply) => {
    const path = req.url.split('?')[0] ?? '';
    const allowed = routes.find((r) => r.pattern.test(path));
    if (allowed)
      return reply
        .status(405)
        .header('allow', [...allowed.methods].join(', '))
        .send(
          errorBody(
            'method_not_allowed',
            `${req.method} is not allowed on ${path}; allowed: ${[...allowed.methods].join(', ')}`,
          ),
        );
    return reply.status(404).send(errorBody('not_found', `no route ${req.method} ${path}`));
  };
  app.setNotFoundHandler(noRoute);

  await app.register(swagger, {
    openapi: {
      info: { title: 'Keel', version: '0.1.0', description: 'Durable AI agents on Temporal.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  // Cookies before auth: the codec server's browser callers (the Temporal UI) carry the token in one.
  await app.register(cookie);
  registerAuth(app, deps.tokens);
  registerSecretSealing(app, secretBoxOf(deps.secretsKey));
  registerDeletionGuard(app, deps.pool);
  // An unknown route is answered before its body is read: a method with a body (QUERY) would otherwise be refused
  // for its content type instead of being told which methods the path has.
  app.addHook('onRequest', async (req, reply) => {
    if (req.is404) await noRoute(req, reply);
  });
  // The operator console's files, after auth and the 404 hook so that both apply to it.
  const consoleDeps = {
    distDir: deps.consoleDir ?? CONSOLE_DIST,
    temporalUiUrl: deps.temporalUiUrl ?? null,
    namespace: deps.temporal.options.namespace,
  };
  await app.register(consoleRoutes(consoleDeps), { prefix: '/console' });

  app.get(
    '/healthz',
    {
      schema: {
        tags: ['health'],
        security: [],
        response: { 200: z.object({ ok: z.boolean(), postgres: z.boolean() }) },
      },
    },
    async () => {
      const postgres = await deps.pool.query('SELECT 1').then(
        () => true,
        () => false,
      );
      return { ok: true, postgres };
    },
  );
  const metrics = createMetrics(deps.pool, { workerMetricsUrl: deps.workerMetricsUrl });
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['health'],
        summary: "Prometheus metrics: Keel totals from PostgreSQL, then the Temporal worker's own",
        hide: true,
      },
    },
    // Totals over every agent: an operator's token only (api/auth.ts decides).
    async (_req, reply) => {
      return reply.type(metrics.contentType).send(await metrics.text());
    },
  );
  const hub = new EventHub(deps.pool);
  // preClose: fastify waits for the requests in flight before onClose, and a live stream never ends by itself.
  app.addHook('preClose', () => hub.close());
  await app.register(eventRoutes({ pool: deps.pool, hub }));
  await app.register(agentRoutes(deps.pool, deps.temporal, deps.egressAllow));
  await app.register(auditRoutes(deps.pool));
  await app.register(approvalRoutes(deps.pool));
  await app.register(spendRoutes(deps.pool));
  const temporalDeadlineMs = deps.temporalDeadlineMs ?? 15_000;
  const conversations = { ...deps, hub, temporalDeadlineMs, closing: closing.signal };
  await app.register(conversationRoutes(conversations));
  await app.register(deletionRoutes({ pool: deps.pool, temporal: deps.temporal, taskQueue: deps.taskQueue }));
  await app.register(evalRoutes({ pool: deps.pool, temporal: deps.temporal, taskQueue: deps.taskQueue }));
  await app.register(taskRoutes(deps.pool));
  await app.register(skillRoutes(deps.pool));
  await app.register(delegateRoutes(deps));
  await app.register(appRoutes(deps.pool));
  await app.register(
    runRoutes({
      pool: deps.pool,
      temporal: deps.temporal,
      namespace: deps.temporal.options.namespace,
      taskQueue: deps.taskQueue,
    }),
  );
  await app.register(
    codecRoutes({
      codecs: deps.temporal.options.loadedDataConverter.payloadCodecs,
      uiOrigin: deps.temporalUiUrl ? new URL(deps.temporalUiUrl).origin : null,
    }),
  );
  await app.register(memoryRoutes(deps.pool));
  await app.register(proposalRoutes({ ...deps, temporalDeadlineMs: deps.temporalDeadlineMs ?? 15_000 }));
  await app.register(routineRoutes({ ...deps, floorMs: deps.routines?.floorMs ?? DEFAULT_ROUTINE_SETTINGS.floorMs }));
  await app.register(routineRunRoutes({ ...deps, temporalDeadlineMs: deps.temporalDeadlineMs ?? 15_000 }));
  await app.register(routineToolRoutes(deps.pool));
  await app.register(artifactRoutes(deps.pool));
  const toolServerDeps = apiToolServerDeps(deps.pool, deps.egressAllow, deps.secretsKey, deps.toolCommands);
  app.addHook('onClose', () => toolServerDeps.close());
  await app.register(toolServerRoutes(toolServerDeps));
  await app.register(toolCallRoutes({ ...deps, temporalDeadlineMs }));
  await app.register(
    jobRoutes({ ...deps, jobs: { ...DEFAULT_JOB_SETTINGS, ...deps.jobs, taskQueue: deps.taskQueue } }),
  );
  return app;
}
