import { z } from 'zod';
import { CONVERSATION } from './conversation';
import { parseEgressAllow, type EgressAllow } from './egress';
import { JOBS } from './jobs';
import { DEFAULT_REFLECTION_SETTINGS, type ReflectionSettings } from './reflection';
import { DEFAULT_ROUTINE_SETTINGS, ROUTINES, type RoutineSettings } from './routines';
import { MODEL_PRICES, ModelPriceSchema, type PriceTable } from './spend';
import { RateLimitsSchema, type RateLimits } from './rate-limits';
import { TOOL_CALLS } from './tool-calls';
import { DEFAULT_TOOL_COMMANDS, type ToolCommands } from './tool-servers';

/** A version of Keel's workers as Temporal's Worker Deployments name it: the deployment, and the build. */
export interface WorkerDeployment {
  name: string;
  buildId: string;
}

/** What one worker process holds at once: its cache of workflows, and its concurrent tasks of each kind. */
export interface WorkerCapacity {
  cachedWorkflows: number;
  workflowTaskSlots: number;
  activitySlots: number;
  localActivitySlots: number;
  /**
   * Set: the SDK's resource-based tuner hands out task slots to hold the process near these shares of CPU and memory
   * (0–1), in place of the fixed slot counts.
   */
  tuner?: { targetCpuUsage: number; targetMemoryUsage: number };
}

/**
 * The worker's defaults (see bench/REPORT.md). The cache is what an open conversation costs in memory; an evicted
 * workflow is replayed from its short history when it next has work.
 */
export const WORKER_DEFAULTS: WorkerCapacity = {
  // 100, not 250: 3,000 conversations left the worker at 380 MiB instead of 486 (bench/CHANGES-TRIED.md).
  cachedWorkflows: 100,
  workflowTaskSlots: 40,
  activitySlots: 100,
  localActivitySlots: 100,
};

/** `resource:0.8,0.9` → the tuner's targets. */
function resourceTuner(setting: string): NonNullable<WorkerCapacity['tuner']> {
  const [cpu, memory] = setting.slice('resource:'.length).split(',').map(Number);
  return { targetCpuUsage: cpu!, targetMemoryUsage: memory! };
}

/**
 * A sandbox wall clock that reaches the activity's timeout would be cut off by Temporal (and retried as a lost worker)
 * instead of ending the run with its own message; the rest of the tool run needs its minute too.
 */
const MAX_RUN_LIMIT_MS = ROUTINES.toolRunTimeoutMs - ROUTINES.toolRunOverheadMs;
const RUN_LIMIT_TOO_LONG =
  `KEEL_ROUTINE_RUN_LIMIT_MS must be at most ${MAX_RUN_LIMIT_MS} ms ` +
  `(the tool run's activity timeout of ${ROUTINES.toolRunTimeoutMs} ms, less ${ROUTINES.toolRunOverheadMs} ms)`;

/**
 * Keel's configuration, read from the environment. Pure: callers pass `process.env`. Every name here is in the
 * README's configuration table.
 */
const Env = z.object({
  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  // Temporal's own names for a cluster that needs TLS (self-hosted with mTLS) or an API key (Temporal Cloud).
  TEMPORAL_API_KEY: z.string().optional(),
  TEMPORAL_TLS: z.enum(['true', 'false']).optional(),
  TEMPORAL_TLS_CLIENT_CERT_PATH: z.string().optional(),
  TEMPORAL_TLS_CLIENT_KEY_PATH: z.string().optional(),
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: z.string().optional(),
  TEMPORAL_TLS_SERVER_NAME: z.string().optional(),
  KEEL_TASK_QUEUE: z.string().default('keel'),
  /**
   * The worker's build: when set, it runs as this version of a Temporal Worker Deployment, and the workflows it
   * starts stay on it (docs/deploy.md). Unset: unversioned, as the dev server runs.
   */
  KEEL_BUILD_ID: z
    .string()
    .regex(/^[\w.-]{1,255}$/, 'letters, digits, underscores, hyphens and dots only')
    .optional(),
  KEEL_DEPLOYMENT_NAME: z
    .string()
    .regex(/^[\w-]{1,255}$/, 'letters, digits, underscores and hyphens only (no dot)')
    .default('keel'),
  DATABASE_URL: z.string().optional(),
  KEEL_DATA_DIR: z.string().default('data'),
  KEEL_API_HOST: z.string().default('127.0.0.1'),
  KEEL_API_PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  KEEL_API_TOKENS: z.string().optional(),
  /** The Temporal Web UI's base URL, for the console's links to runs (unset: the console shows no such link). */
  KEEL_TEMPORAL_UI_URL: z.string().url().optional(),
  KEEL_MODEL: z.enum(['anthropic', 'scripted']).optional(),
  KEEL_ANTHROPIC_MODEL: z.string().default('claude-sonnet-4-5'),
  ANTHROPIC_API_KEY: z.string().optional(),
  ANTHROPIC_BASE_URL: z.string().optional(),
  SLACK_BOT_TOKEN: z.string().optional(),
  KEEL_SLACK_API_URL: z.string().optional(),
  KEEL_SLACK_OWNER: z.string().optional(),
  TEMPORAL_CLI_PATH: z.string().optional(),
  KEEL_EMBEDDED_PG_PORT: z.coerce.number().int().default(5433),
  /** As root: where the embedded PostgreSQL's binaries and data go when the postgres user cannot enter the checkout. */
  KEEL_PG_RUNTIME_DIR: z.string().optional(),
  KEEL_LOG_LEVEL: z.string().default('info'),
  /** host:port where the worker serves the Temporal SDK's Prometheus metrics (unset: not served). */
  KEEL_WORKER_METRICS_ADDRESS: z.string().optional(),
  /** The URL the API fetches those from, to append them to its /metrics. */
  KEEL_WORKER_METRICS_URL: z.string().url().optional(),
  /** A prebuilt workflow bundle the worker runs instead of bundling the sources at start (tests, the soak, benches). */
  KEEL_WORKFLOW_BUNDLE: z.string().min(1).optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.string().url().optional(),
  /** A conversation idle this long closes its workflow; its next message starts a new run. */
  KEEL_CONVERSATION_IDLE_MS: z.coerce.number().int().min(1000).default(CONVERSATION.idleCloseMs),
  /** The worker's cache of workflows (memory) and its concurrent task slots; defaults chosen by `npm run bench`. */
  KEEL_WORKER_CACHED_WORKFLOWS: z.coerce.number().int().min(0).default(WORKER_DEFAULTS.cachedWorkflows),
  KEEL_WORKER_WORKFLOW_TASK_SLOTS: z.coerce.number().int().min(2).default(WORKER_DEFAULTS.workflowTaskSlots),
  KEEL_WORKER_ACTIVITY_SLOTS: z.coerce.number().int().min(1).default(WORKER_DEFAULTS.activitySlots),
  KEEL_WORKER_LOCAL_ACTIVITY_SLOTS: z.coerce.number().int().min(1).default(WORKER_DEFAULTS.localActivitySlots),
  /** `resource:<cpu>,<memory>` (shares, e.g. resource:0.8,0.8): the SDK's resource-based tuner, not slot counts. */
  KEEL_WORKER_TUNER: z
    .string()
    .regex(/^resource:(0(\.\d+)?|1),(0(\.\d+)?|1)$/, 'resource:<cpu share>,<memory share>, each between 0 and 1')
    .optional(),
  KEEL_JOB_EVERY_FLOOR_MS: z.coerce.number().int().positive().default(60_000),
  KEEL_JOB_CATCHUP_WINDOW_MS: z.coerce.number().int().positive().default(600_000),
  /** Comma-separated retry delays of a failed job run, in ms (default 30 s, 1 min, 5 min, 15 min, 60 min). */
  KEEL_JOB_BACKOFF_MS: z.string().optional(),
  /** How long a job run waits for its turn before it books an error that says why (default 15 min). */
  KEEL_JOB_TURN_DEADLINE_MS: z.coerce.number().int().min(1000).default(JOBS.turnDeadlineMs),
  KEEL_ROUTINE_FLOOR_MS: z.coerce.number().int().min(0).default(DEFAULT_ROUTINE_SETTINGS.floorMs),
  KEEL_ROUTINE_RUN_LIMIT_MS: z.coerce
    .number()
    .int()
    .positive()
    .max(MAX_RUN_LIMIT_MS, RUN_LIMIT_TOO_LONG)
    .default(DEFAULT_ROUTINE_SETTINGS.runLimitMs),
  KEEL_ROUTINE_SMOKE_LIMIT_MS: z.coerce.number().int().positive().default(DEFAULT_ROUTINE_SETTINGS.smokeLimitMs),
  KEEL_ROUTINE_MEMORY_MB: z.coerce.number().int().min(8).max(4096).default(DEFAULT_ROUTINE_SETTINGS.memoryLimitMb),
  KEEL_ROUTINE_APPROVAL_WAIT_MS: z.coerce.number().int().positive().default(DEFAULT_ROUTINE_SETTINGS.approvalWaitMs),
  KEEL_REFLECTION_DRAIN_EVERY_MS: z.coerce.number().int().positive().default(DEFAULT_REFLECTION_SETTINGS.drainEveryMs),
  KEEL_REFLECTION_DRAIN_AT: z.coerce.number().int().positive().default(DEFAULT_REFLECTION_SETTINGS.drainAtQueued),
  KEEL_REFLECTION_GATE: z.enum(['on', 'off']).default(DEFAULT_REFLECTION_SETTINGS.gate ? 'on' : 'off'),
  KEEL_REFLECTION_GATE_MODEL: z.string().default(DEFAULT_REFLECTION_SETTINGS.gateModel),
  KEEL_REFLECTION_TIERS: z.string().default(DEFAULT_REFLECTION_SETTINGS.tiers.join(',')),
  KEEL_REFLECTION_JUDGES: z.coerce.number().int().min(0).max(9).default(DEFAULT_REFLECTION_SETTINGS.judges),
  KEEL_REFLECTION_APPROVAL_FILES: z.string().default(DEFAULT_REFLECTION_SETTINGS.approvalFiles.join(',')),
  KEEL_REFLECTION_APPROVAL_WAIT_MS: z.coerce
    .number()
    .int()
    .positive()
    .default(DEFAULT_REFLECTION_SETTINGS.approvalWaitMs),
  KEEL_REFLECTION_DAILY_COST_USD: z.coerce.number().min(0).default(DEFAULT_REFLECTION_SETTINGS.dailyCostCeilingUsd),
  /** USD per million input and output tokens, e.g. `3,15`. */
  KEEL_REFLECTION_PRICES: z
    .string()
    .default(`${DEFAULT_REFLECTION_SETTINGS.prices.input},${DEFAULT_REFLECTION_SETTINGS.prices.output}`),
  KEEL_REFLECTION_URL_ALLOWLIST: z.string().default(DEFAULT_REFLECTION_SETTINGS.urlAllowlist.join(',')),
  /** Exceptions to the egress guard: hosts, `*.domain`, addresses, CIDRs and `loopback`, comma-separated. */
  /** Keys that seal secrets at rest (`keyId:base64key`, comma-separated; the first seals). */
  KEEL_SECRETS_KEY: z.string().optional(),
  /** Keys that seal every Temporal payload (`keyId:base64key`, comma-separated; the first seals). */
  KEEL_PAYLOAD_KEYS: z.string().optional(),
  /** `off` runs without payload encryption on purpose (production refuses to start without keys otherwise). */
  KEEL_PAYLOAD_ENCRYPTION: z.enum(['on', 'off']).optional(),
  /** How long a tool call that needs a person's approval waits: ms, or a number with s, m, h or d. */
  KEEL_TOOL_APPROVAL_WAIT: z
    .string()
    .regex(/^\d+(ms|s|m|h|d)?$/, 'a duration: ms, or a whole number with s, m, h or d (e.g. 24h)')
    .optional(),
  /** The commands a stdio tool server may run: comma-separated, `*` for any, `none` for none. */
  KEEL_TOOL_COMMANDS: z.string().default(DEFAULT_TOOL_COMMANDS.join(',')),
  KEEL_EGRESS_ALLOW: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      try {
        return parseEgressAllow(raw);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
        return z.NEVER;
      }
    }),
  /** USD per million tokens per model, over the built-in table: {"model": {"input": 3, "output": 15}}. */
  KEEL_MODEL_PRICES: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (!raw) return {};
      const parsed = z.record(z.string().min(1), ModelPriceSchema).safeParse(safeJson(raw));
      if (!parsed.success) {
        ctx.addIssue({
          code: 'custom',
          message:
            'KEEL_MODEL_PRICES must be a JSON object of model → {input, output, cacheRead?, cacheWrite?} ' +
            'in USD per million tokens',
        });
        return z.NEVER;
      }
      return parsed.data;
    }),
  /**
   * Provider rate limits per model, shared by every worker:
   * {"anthropic": {"claude-sonnet-4-5": {"requestsPerMinute": 50, "inputTokensPerMinute": 30000}}}.
   */
  KEEL_RATE_LIMITS: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (!raw) return undefined;
      const parsed = RateLimitsSchema.safeParse(safeJson(raw));
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        ctx.addIssue({
          code: 'custom',
          message:
            `${issue?.path.join('.') || 'value'}: ${safeJson(raw) === undefined ? 'not JSON' : issue?.message} ` +
            '(it takes a JSON object of provider ' +
            '→ model or "*" → {requestsPerMinute?, inputTokensPerMinute?, outputTokensPerMinute?, burstSeconds?})',
        });
        return z.NEVER;
      }
      return parsed.data;
    }),
  /** JSON object of HTTP integrations for routines' integrations.call: {"name": "https://…"}. */
  KEEL_INTEGRATIONS: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (!raw) return {};
      const parsed = z
        .record(
          z.string().regex(/^[A-Za-z0-9._-]{1,64}$/),
          z
            .string()
            .url()
            .refine((u) => /^https?:\/\//i.test(u)),
        )
        .safeParse(safeJson(raw));
      if (!parsed.success) {
        ctx.addIssue({ code: 'custom', message: 'KEEL_INTEGRATIONS must be a JSON object of name → http(s) URL' });
        return z.NEVER;
      }
      return parsed.data;
    }),
});

/** Every environment variable Keel reads (the compose file's consistency test checks its names against these). */
export const CONFIG_NAMES: readonly string[] = Object.keys(Env.shape);

const list = (raw: string) =>
  raw
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);

function prices(raw: string): ReflectionSettings['prices'] {
  const parts = raw.split(',').map((v) => v.trim());
  const [input, output] = parts.map(Number);
  if (
    parts.length !== 2 ||
    parts.some((p) => p === '') ||
    !Number.isFinite(input) ||
    !Number.isFinite(output) ||
    input! < 0 ||
    output! < 0
  )
    throw new Error('KEEL_REFLECTION_PRICES must be "<input>,<output>" USD per million tokens');
  return { input: input!, output: output! };
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return undefined;
  }
}

/** Where Temporal is, and how to reach it when it needs TLS or an API key. */
export interface TemporalSettings {
  address: string;
  namespace: string;
  taskQueue: string;
  /** Temporal Cloud's API key (TLS is then on). */
  apiKey?: string;
  /** TLS to the frontend: the system's roots, or the given CA; a client certificate for mTLS. */
  tls?: { clientCertPath?: string; clientKeyPath?: string; serverCaCertPath?: string; serverName?: string };
}

/** TLS is on when asked for, when a certificate is named, or with an API key (Temporal Cloud takes keys over TLS). */
function temporalTls(e: z.infer<typeof Env>): Pick<TemporalSettings, 'tls'> {
  const named = {
    ...(e.TEMPORAL_TLS_CLIENT_CERT_PATH ? { clientCertPath: e.TEMPORAL_TLS_CLIENT_CERT_PATH } : {}),
    ...(e.TEMPORAL_TLS_CLIENT_KEY_PATH ? { clientKeyPath: e.TEMPORAL_TLS_CLIENT_KEY_PATH } : {}),
    ...(e.TEMPORAL_TLS_SERVER_CA_CERT_PATH ? { serverCaCertPath: e.TEMPORAL_TLS_SERVER_CA_CERT_PATH } : {}),
    ...(e.TEMPORAL_TLS_SERVER_NAME ? { serverName: e.TEMPORAL_TLS_SERVER_NAME } : {}),
  };
  if (e.TEMPORAL_TLS === 'false') return {};
  const on = e.TEMPORAL_TLS === 'true' || Object.keys(named).length > 0 || e.TEMPORAL_API_KEY !== undefined;
  return on ? { tls: named } : {};
}

export interface KeelConfig {
  temporal: TemporalSettings;
  databaseUrl?: string;
  dataDir: string;
  api: { host: string; port: number; tokens: Map<string, string> | undefined };
  /** The Temporal Web UI's base URL, for links to runs; null when unknown. */
  temporalUiUrl: string | null;
  model: {
    provider: 'anthropic' | 'scripted';
    anthropicModel: string;
    anthropicApiKey?: string;
    anthropicBaseUrl?: string;
  };
  slack: { token?: string; apiUrl?: string; owner?: string };
  temporalCliPath?: string;
  embeddedPgPort: number;
  embeddedPgRuntimeDir?: string;
  logLevel: string;
  workerMetricsAddress?: string;
  workerMetricsUrl?: string;
  /** A prebuilt workflow bundle for the worker (KEEL_WORKFLOW_BUNDLE); the sources, bundled at start, when unset. */
  workflowBundle?: string;
  /** OpenTelemetry tracing: on when an OTLP endpoint is set (the exporter reads the OTEL_* variables itself). */
  tracing?: { endpoint: string };
  /** How long a conversation stays open without work before its workflow closes. */
  conversationIdleMs: number;
  worker: WorkerCapacity;
  /** The Worker Deployment version this worker runs as, when versioned (KEEL_BUILD_ID). */
  deployment?: WorkerDeployment;
  jobs: { everyFloorMs: number; catchupWindowMs: number; turnDeadlineMs: number; backoffMs?: number[] };
  routines: RoutineSettings;
  reflection: ReflectionSettings;
  /** USD per million tokens per model: the built-in table with KEEL_MODEL_PRICES over it. */
  prices: PriceTable;
  /** What the egress guard lets through besides public addresses. */
  egress: { allow: EgressAllow };
  /** KEEL_SECRETS_KEY as written; services/secrets.ts reads its keys. Unset: no secret can be stored. */
  secretsKey?: string;
  /**
   * Temporal payload encryption (services/payload-encryption.ts): KEEL_PAYLOAD_KEYS as written,
   * KEEL_PAYLOAD_ENCRYPTION, and whether this is production (NODE_ENV=production), where going without keys must be
   * asked for.
   */
  payloads: { keys?: string; encryption?: 'on' | 'off'; production: boolean };
  /** Tool servers: how long a call waits for a person's approval, and the commands a stdio server may run. */
  tools: { approvalWaitMs: number; commands: ToolCommands };
  /** Provider rate limits per model (KEEL_RATE_LIMITS); none when unset. */
  rateLimits?: RateLimits;
}

export function loadConfig(env: Record<string, string | undefined>): KeelConfig {
  const parsed = Env.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  // One line per variable, naming it: what a person starting Keel reads.
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.') || 'environment'}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  return {
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.KEEL_TASK_QUEUE,
      ...(e.TEMPORAL_API_KEY ? { apiKey: e.TEMPORAL_API_KEY } : {}),
      ...temporalTls(e),
    },
    databaseUrl: e.DATABASE_URL,
    dataDir: e.KEEL_DATA_DIR,
    api: { host: e.KEEL_API_HOST, port: e.KEEL_API_PORT, tokens: parseTokens(e.KEEL_API_TOKENS) },
    temporalUiUrl: e.KEEL_TEMPORAL_UI_URL ?? null,
    model: {
      // Anthropic when a key is present, the offline scripted model otherwise, unless KEEL_MODEL says.
      provider: e.KEEL_MODEL ?? (e.ANTHROPIC_API_KEY ? 'anthropic' : 'scripted'),
      anthropicModel: e.KEEL_ANTHROPIC_MODEL,
      anthropicApiKey: e.ANTHROPIC_API_KEY,
      anthropicBaseUrl: e.ANTHROPIC_BASE_URL,
    },
    slack: { token: e.SLACK_BOT_TOKEN, apiUrl: e.KEEL_SLACK_API_URL, owner: e.KEEL_SLACK_OWNER },
    temporalCliPath: e.TEMPORAL_CLI_PATH,
    embeddedPgPort: e.KEEL_EMBEDDED_PG_PORT,
    embeddedPgRuntimeDir: e.KEEL_PG_RUNTIME_DIR,
    logLevel: e.KEEL_LOG_LEVEL,
    workerMetricsAddress: e.KEEL_WORKER_METRICS_ADDRESS,
    workerMetricsUrl: e.KEEL_WORKER_METRICS_URL,
    ...(e.KEEL_WORKFLOW_BUNDLE ? { workflowBundle: e.KEEL_WORKFLOW_BUNDLE } : {}),
    ...(e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || e.OTEL_EXPORTER_OTLP_ENDPOINT
      ? { tracing: { endpoint: (e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? e.OTEL_EXPORTER_OTLP_ENDPOINT)! } }
      : {}),
    conversationIdleMs: e.KEEL_CONVERSATION_IDLE_MS,
    worker: {
      cachedWorkflows: e.KEEL_WORKER_CACHED_WORKFLOWS,
      workflowTaskSlots: e.KEEL_WORKER_WORKFLOW_TASK_SLOTS,
      activitySlots: e.KEEL_WORKER_ACTIVITY_SLOTS,
      localActivitySlots: e.KEEL_WORKER_LOCAL_ACTIVITY_SLOTS,
      ...(e.KEEL_WORKER_TUNER ? { tuner: resourceTuner(e.KEEL_WORKER_TUNER) } : {}),
    },
    ...(e.KEEL_BUILD_ID ? { deployment: { name: e.KEEL_DEPLOYMENT_NAME, buildId: e.KEEL_BUILD_ID } } : {}),
    jobs: {
      everyFloorMs: e.KEEL_JOB_EVERY_FLOOR_MS,
      catchupWindowMs: e.KEEL_JOB_CATCHUP_WINDOW_MS,
      turnDeadlineMs: e.KEEL_JOB_TURN_DEADLINE_MS,
      ...(e.KEEL_JOB_BACKOFF_MS
        ? {
            backoffMs: e.KEEL_JOB_BACKOFF_MS.split(',')
              .map((v) => Number(v.trim()))
              .filter((n) => Number.isFinite(n) && n > 0),
          }
        : {}),
    },
    routines: {
      floorMs: e.KEEL_ROUTINE_FLOOR_MS,
      runLimitMs: e.KEEL_ROUTINE_RUN_LIMIT_MS,
      smokeLimitMs: e.KEEL_ROUTINE_SMOKE_LIMIT_MS,
      memoryLimitMb: e.KEEL_ROUTINE_MEMORY_MB,
      approvalWaitMs: e.KEEL_ROUTINE_APPROVAL_WAIT_MS,
      integrations: e.KEEL_INTEGRATIONS,
    },
    reflection: {
      drainEveryMs: e.KEEL_REFLECTION_DRAIN_EVERY_MS,
      drainAtQueued: e.KEEL_REFLECTION_DRAIN_AT,
      gate: e.KEEL_REFLECTION_GATE === 'on',
      gateModel: e.KEEL_REFLECTION_GATE_MODEL,
      tiers: list(e.KEEL_REFLECTION_TIERS),
      judges: e.KEEL_REFLECTION_JUDGES,
      approvalFiles: e.KEEL_REFLECTION_APPROVAL_FILES.trim() === 'none' ? [] : list(e.KEEL_REFLECTION_APPROVAL_FILES),
      approvalWaitMs: e.KEEL_REFLECTION_APPROVAL_WAIT_MS,
      dailyCostCeilingUsd: e.KEEL_REFLECTION_DAILY_COST_USD,
      prices: prices(e.KEEL_REFLECTION_PRICES),
      urlAllowlist: list(e.KEEL_REFLECTION_URL_ALLOWLIST),
    },
    prices: { ...MODEL_PRICES, ...e.KEEL_MODEL_PRICES },
    ...(e.KEEL_RATE_LIMITS ? { rateLimits: e.KEEL_RATE_LIMITS } : {}),
    egress: { allow: e.KEEL_EGRESS_ALLOW },
    ...(e.KEEL_SECRETS_KEY ? { secretsKey: e.KEEL_SECRETS_KEY } : {}),
    payloads: {
      ...(e.KEEL_PAYLOAD_KEYS ? { keys: e.KEEL_PAYLOAD_KEYS } : {}),
      ...(e.KEEL_PAYLOAD_ENCRYPTION ? { encryption: e.KEEL_PAYLOAD_ENCRYPTION } : {}),
      production: env.NODE_ENV === 'production',
    },
    tools: {
      approvalWaitMs: e.KEEL_TOOL_APPROVAL_WAIT ? durationMs(e.KEEL_TOOL_APPROVAL_WAIT) : TOOL_CALLS.approvalWaitMs,
      commands: toolCommands(e.KEEL_TOOL_COMMANDS),
    },
  };
}

function toolCommands(raw: string): ToolCommands {
  const trimmed = raw.trim();
  if (trimmed === '*') return '*';
  if (trimmed === 'none') return [];
  return list(trimmed);
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "24h", "90s", "1500" (ms). The schema has checked the form. */
function durationMs(raw: string): number {
  const [, n, unit] = /^(\d+)(ms|s|m|h|d)?$/.exec(raw)!;
  return Number(n) * UNIT_MS[unit ?? 'ms']!;
}

/** A token given by its SHA-256 alone (`sha256:<64 hex>=agentId`): the configuration then holds no usable token. */
export const TOKEN_DIGEST_PREFIX = 'sha256:';
const TOKEN_DIGEST = /^sha256:[0-9a-f]{64}$/;

/**
 * `token=agentId` pairs, comma-separated; `*` grants every agent, and `ro:` before the agent makes a read-only token
 * (api/auth.ts). A token may be given as `sha256:<hex of its SHA-256>`. Unset means development mode (no tokens).
 */
export function parseTokens(raw: string | undefined): Map<string, string> | undefined {
  if (!raw) return undefined;
  const tokens = new Map<string, string>();
  const pairs = raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  pairs.forEach((pair, i) => {
    const eq = pair.lastIndexOf('=');
    const token = pair.slice(0, Math.max(eq, 0)).trim();
    const agent = pair.slice(eq + 1).trim();
    // The message never quotes the pair: it holds a secret.
    if (eq < 0 || !token || !agent) throw new Error(`KEEL_API_TOKENS: pair ${i + 1} is not token=agentId`);
    if (token.startsWith(TOKEN_DIGEST_PREFIX) && !TOKEN_DIGEST.test(token))
      throw new Error(`KEEL_API_TOKENS: pair ${i + 1} starts with sha256: but is not sha256:<64 lowercase hex>=agent`);
    tokens.set(token, agent);
  });
  return tokens;
}

/** Loopback hosts: the only ones the API may bind to without tokens. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** Without tokens the API is for development only: it may listen on loopback and nowhere else. */
export function assertSafeBind(host: string, tokens: Map<string, string> | undefined): void {
  if (!tokens && !isLoopbackHost(host)) {
    throw new Error(
      `refusing to listen on ${host} without KEEL_API_TOKENS: without tokens the API binds to loopback only`,
    );
  }
}
