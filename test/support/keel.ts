import { randomUUID } from 'node:crypto';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { DefaultLogger, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { inject } from 'vitest';
import type { Transports } from '../../adapters/delivery/transport';
import { noneTransport } from '../../adapters/delivery/none';
import { slackTransport } from '../../adapters/delivery/slack';
import { webhookTransport } from '../../adapters/delivery/webhook';
import { createActivities, type KeelActivities } from '../../activities';
import { scriptedProvider } from '../../worker/wiring';
import { buildApi } from '../../api/server';
import { createPool, type Pool } from '../../db/pool';
import { queueScriptedResponse } from '../../db/scripted-responses';
import type { ScriptedResponse } from '../../domain/scripted-model';
import { conversationWorkflowId } from '../../domain/ids';
import { EVENTS_CHANNEL } from '../../db/events';
import { loadConfig } from '../../domain/config';
import type { ModelProvider } from '../../domain/model';
import { DEFAULT_REFLECTION_SETTINGS, type ReflectionSettings } from '../../domain/reflection';
import { DEFAULT_ROUTINE_SETTINGS, type RoutineSettings } from '../../domain/routines';
import { createEgressGuard, type EgressGuard } from '../../adapters/egress';
import { DEFAULT_JOB_SETTINGS, type JobSettings } from '../../services/job-settings';
import { defaultModelName } from '../../worker/wiring';
import { createKeelWorker } from '../../worker/worker';
import { payloadEncryption } from '../../services/payload-encryption';
import { FORWARD_CORE_LOGS, tapFailedWorkflowTasks } from '../../worker/logger';
import { LOOPBACK_ALLOW } from './egress';
import { secretBoxOf } from '../../services/secrets';
import { DEFAULT_TOOL_COMMANDS } from '../../domain/tool-servers';
import { toolSessionPool } from '../../worker/wiring';

/** The tests' key for secrets at rest (KEEL_SECRETS_KEY's form): fixed, so a worker process can be given it too. */
export const TEST_SECRETS_KEY = `test:${Buffer.alloc(32, 7).toString('base64')}`;

let runtimeInstalled = false;

export interface TestKeel {
  api: FastifyInstance;
  pool: Pool;
  client: Client;
  taskQueue: string;
  worker?: Worker;
  /** POST a message; `wait` in seconds. */
  post(
    agentId: string,
    conversationId: string,
    body: Record<string, unknown>,
    opts?: { wait?: number; token?: string },
  ): Promise<{ status: number; body: SubmitAnswer }>;
  /** Any request to the API, JSON in and out: its status, its parsed body and its raw text. */
  call<T>(method: ApiMethod, url: string, body?: unknown): Promise<{ status: number; body: T; raw: string }>;
  stopWorker(): Promise<void>;
  stop(): Promise<void>;
}

export type ApiMethod = 'GET' | 'PUT' | 'POST' | 'PATCH' | 'DELETE';

export interface SubmitAnswer {
  messageId: string;
  turnId: string;
  status: string;
  reply?: { text: string; delivery: { outcome: string | null; attempts: number } };
  error?: { code: string; message: string };
}

export interface TestKeelOptions {
  /** Build the model provider; the scripted model by default. */
  provider?: (pool: Pool) => ModelProvider;
  transports?: Partial<Transports>;
  tokens?: Map<string, string>;
  /** false: no in-process worker (the test runs one as a child process). */
  worker?: boolean;
  databaseUrl?: string;
  temporalAddress?: string;
  /** Scheduling settings (tests shorten the retry backoff). */
  jobs?: Partial<Omit<JobSettings, 'taskQueue'>>;
  /** Routine settings (tests shorten the sandbox and approval limits). */
  routines?: Partial<RoutineSettings>;
  /** Reflection settings (tests drain at 1 queued, shorten the cadence, lower the ceiling). */
  reflection?: Partial<ReflectionSettings>;
  /** A workflow bundle of the test's own (one built with a test interceptor); the run's shared bundle otherwise. */
  workflowBundlePath?: string;
  /** The worker's egress guard; by default one that allows loopback (and only loopback) besides public addresses. */
  egress?: EgressGuard;
  /** How long a conversation stays open idle (the deployment's default otherwise). */
  conversationIdleMs?: number;
  /** Where the console links runs in the Temporal UI (KEEL_TEMPORAL_UI_URL); no links when unset. */
  temporalUiUrl?: string;
  /** The API's request log at debug level, into this stream (none otherwise). */
  apiLog?: NodeJS.WritableStream;
  /** How long a tool call waits for a person's approval (the deployment's 24 h otherwise). */
  toolApprovalWaitMs?: number;
  /** Replaces some of the worker's activities (a test holding one at an instant it chooses). */
  activities?: (real: KeelActivities) => Partial<KeelActivities>;
  /** The task queue (one of its own otherwise): a second Keel takes up the first's workflows on it. */
  taskQueue?: string;
  /** Seals every payload with these keys (KEEL_PAYLOAD_KEYS's form), as the client, API and worker; clear otherwise. */
  payloadKeys?: string;
  /** Keys for secrets at rest (KEEL_SECRETS_KEY's form); TEST_SECRETS_KEY unless given, none when null. */
  secretsKey?: string | null;
}

/** Keel in-process against the run's real Temporal dev server and PostgreSQL, on a task queue of its own. */
export async function startTestKeel(opts: TestKeelOptions = {}): Promise<TestKeel> {
  if (!runtimeInstalled) {
    // As the worker process does: core's logs forwarded, a failed workflow task recorded (worker/worker.ts).
    Runtime.install({
      logger: tapFailedWorkflowTasks(new DefaultLogger(process.env.KEEL_TEST_LOG === 'warn' ? 'WARN' : 'ERROR')),
      telemetryOptions: { logging: FORWARD_CORE_LOGS },
    });
    runtimeInstalled = true;
  }
  const databaseUrl = opts.databaseUrl ?? inject('databaseUrl');
  const address = opts.temporalAddress ?? inject('temporalAddress');
  const taskQueue = opts.taskQueue ?? `test-${randomUUID()}`;
  const pool = createPool(databaseUrl);
  const connection = await Connection.connect({ address });
  const { dataConverter } = payloadEncryption({ keys: opts.payloadKeys, production: false }, 'test Keel');
  const client = new Client({ connection, dataConverter });
  const jobs = { ...DEFAULT_JOB_SETTINGS, ...opts.jobs };
  const routines = { ...DEFAULT_ROUTINE_SETTINGS, ...opts.routines };
  // Tests allow loopback explicitly: their webhook receivers, fake Slack and integrations listen on 127.0.0.1.
  // A guard of its own, closed with this Keel (the shared loopbackEgress outlives every Keel of the file).
  const egress = opts.egress ?? createEgressGuard({ allow: LOOPBACK_ALLOW });
  const { conversationIdleMs } = opts;
  const secretsKey = opts.secretsKey === undefined ? TEST_SECRETS_KEY : (opts.secretsKey ?? undefined);
  const api = await buildApi({
    pool,
    temporal: client,
    taskQueue,
    tokens: opts.tokens,
    egressAllow: egress.allow,
    ...(secretsKey ? { secretsKey } : {}),
    ...(opts.apiLog ? { logger: { level: 'debug', stream: opts.apiLog } } : {}),
    // This very node too: a test starts a command that is not an MCP server with it.
    toolCommands: [...DEFAULT_TOOL_COMMANDS, process.execPath],
    jobs,
    routines,
    conversationIdleMs,
    ...(opts.temporalUiUrl ? { temporalUiUrl: opts.temporalUiUrl } : {}),
  });

  const toolSessions = toolSessionPool();
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let nativeConnection: NativeConnection | undefined;
  if (opts.worker !== false) {
    nativeConnection = await NativeConnection.connect({ address });
    const deps = {
      pool,
      provider: (opts.provider ?? scriptedProvider)(pool),
      defaultModel: defaultModelName(loadConfig({})),
      transports: {
        none: noneTransport(),
        webhook: webhookTransport({ egress }),
        slack: slackTransport({ egress }),
        ...opts.transports,
      },
      egress,
      jobs,
      routines,
      reflection: { ...DEFAULT_REFLECTION_SETTINGS, ...opts.reflection },
      conversationIdleMs,
      secrets: secretBoxOf(secretsKey),
      toolSessions,
      ...(opts.toolApprovalWaitMs ? { toolApprovalWaitMs: opts.toolApprovalWaitMs } : {}),
    };
    const replaced = opts.activities;
    const workflows = { workflowBundle: { codePath: opts.workflowBundlePath ?? inject('workflowBundlePath') } };
    worker = await createKeelWorker({
      connection: nativeConnection,
      namespace: 'default',
      taskQueue,
      workflows,
      deps,
      dataConverter,
      ...(replaced ? { extra: { activities: withReplaced(createActivities({ ...deps, workflows }), replaced) } } : {}),
    });
    running = worker.run();
  }
  const stopWorker = async () => {
    if (worker && worker.getState() === 'RUNNING') worker.shutdown();
    await running;
    await nativeConnection?.close();
    nativeConnection = undefined;
    await toolSessions.closeAll();
  };

  return {
    api,
    pool,
    client,
    taskQueue,
    worker,
    async post(agentId, conversationId, body, o = {}) {
      const res = await api.inject({
        method: 'POST',
        url: `/v1/agents/${agentId}/conversations/${conversationId}/messages${o.wait ? `?wait=${o.wait}` : ''}`,
        headers: { 'content-type': 'application/json', ...(o.token ? { authorization: `Bearer ${o.token}` } : {}) },
        payload: JSON.stringify(body),
      });
      return { status: res.statusCode, body: res.json<SubmitAnswer>() };
    },
    async call<T>(method: ApiMethod, url: string, body?: unknown) {
      const res = await api.inject({
        method,
        url,
        ...(body === undefined
          ? {}
          : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
      });
      return { status: res.statusCode, body: res.json<T>(), raw: res.body };
    },
    stopWorker,
    async stop() {
      await stopWorker();
      await api.close();
      await connection.close();
      await pool.end();
      if (!opts.egress) await egress.close();
    },
  };
}

function withReplaced(
  real: KeelActivities,
  replaced: (real: KeelActivities) => Partial<KeelActivities>,
): KeelActivities {
  return { ...real, ...replaced(real) };
}

export function uniqueId(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/**
 * The workflow's history once its last workflow task has completed: a turn's local steps are in it from then on (a
 * reply can be out while the task that made it still runs).
 */
export async function settledHistory(keel: Pick<TestKeel, 'client'>, workflowId: string) {
  const { EventType } = temporal.api.enums.v1;
  const taskEvents = new Set<unknown>([
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
  ]);
  return eventually(
    async () => {
      const history = await keel.client.workflow.getHandle(workflowId).fetchHistory();
      const lastTask = (history.events ?? []).filter((e) => taskEvents.has(e.eventType)).at(-1);
      return lastTask?.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED && history;
    },
    30_000,
    `the last workflow task of ${workflowId} to complete`,
  );
}

/** Awaits a condition (re-checked every 50 ms) instead of sleeping a guessed time. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 30_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Resolves at the next text a model call of the conversation streams: its next text.delta NOTIFY (streamed text goes
 * nowhere else; a turn's model calls are local activities, whose progress no pending activity shows).
 */
export async function streamingText(pool: Pool, conversationKey: string, timeoutMs: number): Promise<void> {
  const listener = await pool.connect();
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${conversationKey} to stream text`)),
        timeoutMs,
      );
      listener.on('notification', (n) => {
        const event = JSON.parse(n.payload ?? '{}') as { key?: string; type?: string };
        if (event.key !== conversationKey || event.type !== 'text.delta') return;
        clearTimeout(timer);
        resolve();
      });
      listener.query(`LISTEN ${EVENTS_CHANNEL}`).catch(reject);
    });
  } finally {
    listener.removeAllListeners('notification');
    await listener.query(`UNLISTEN ${EVENTS_CHANNEL}`).catch(() => undefined);
    listener.release();
  }
}

/** What a delegate's running model call last reported in its heartbeat details (0 until it has streamed). */
export async function streamedChars(keel: TestKeel, workflowId: string): Promise<number> {
  const described = await keel.client.workflow
    .getHandle(workflowId)
    .describe()
    .catch((err: unknown) => {
      if (err instanceof WorkflowNotFoundError) return undefined; // not started yet
      throw err;
    });
  if (!described) return 0;
  const { raw } = described;
  const details = raw.pendingActivities?.[0]?.heartbeatDetails?.payloads?.[0];
  return details ? defaultPayloadConverter.fromPayload<{ streamedChars: number }>(details).streamedChars : 0;
}

/** Queues an exact scripted-model answer for a conversation, creating its rows first if it has none yet. */
export async function queueAnswer(
  keel: TestKeel,
  agentId: string,
  conversationId: string,
  response: ScriptedResponse,
): Promise<void> {
  const key = conversationWorkflowId(agentId, conversationId);
  await keel.pool.query('INSERT INTO agents (id, name) VALUES ($1, $1) ON CONFLICT DO NOTHING', [agentId]);
  await keel.pool.query(
    'INSERT INTO conversations (key, agent_id, conversation_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
    [key, agentId, conversationId],
  );
  await queueScriptedResponse(keel.pool, key, response);
}
