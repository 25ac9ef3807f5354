import type { Pool } from '../db/pool';
import { textDeltaPublisher } from '../services/streamed-text';
import type { ModelProvider } from '../domain/model';
import { conversationActivities } from './conversation';
import { delegationActivities } from './delegation';
import { deletionActivities } from './deletion';
import { evalActivities } from './evals';
import { jobRunActivities } from './job-run';
import { jobRunAtOnceActivities } from './job-run-at-once';
import type { Transports } from '../adapters/delivery/transport';
import { deliveryActivities } from './delivery';
import { modelActivities, type ModelActivityDeps } from './model';
import { routineRunActivities } from './routine-run';
import { reflectionActivities } from './reflection';
import { replayActivities } from './replay';
import type { WorkflowSource } from '../services/replay';
import { DEFAULT_REFLECTION_SETTINGS, type ReflectionSettings } from '../domain/reflection';
import { DEFAULT_ROUTINE_SETTINGS, type RoutineSettings } from '../domain/routines';
import { MODEL_PRICES, type PriceTable } from '../domain/spend';
import type { RateLimits } from '../domain/rate-limits';
import type { EgressGuard } from '../adapters/egress';
import { DEFAULT_JOB_SETTINGS, type JobSettings } from '../services/job-settings';
import type { ToolSessionPool } from '../adapters/mcp/sessions';
import { NO_SECRET_BOX, type SecretBox } from '../services/secrets';
import { openingSecrets } from '../services/delivery-secrets';
import { TOOL_CALLS } from '../domain/tool-calls';
import { toolCallActivities } from './tool-calls';

export interface ActivityDeps {
  pool: Pool;
  provider: ModelProvider;
  defaultModel: string;
  transports: Transports;
  onTextDelta?: ModelActivityDeps['onTextDelta'];
  /** Scheduling settings of the run activities (retry backoff, floors). */
  jobs?: Omit<JobSettings, 'taskQueue'>;
  /** Routine limits (sandbox memory and time, approval wait) and integrations. */
  routines?: RoutineSettings;
  /** Reflection cadence, tiers, gates and the daily cost ceiling. */
  reflection?: ReflectionSettings;
  /** The egress guard of routine integrations. */
  egress: EgressGuard;
  /** How long a conversation this worker starts (a job's) stays open idle; CONVERSATION.idleCloseMs when unset. */
  conversationIdleMs?: number;
  /** USD per million tokens per model (KEEL_MODEL_PRICES over domain/spend.ts MODEL_PRICES when unset). */
  prices?: PriceTable;
  /** Provider rate limits per model (KEEL_RATE_LIMITS), shared by every worker; none when unset. */
  rateLimits?: RateLimits;
  /** The workflow code this worker runs, which an operator's replay checks a history against. */
  workflows: WorkflowSource;
  /** Opens the sealed secrets of tool servers and webhooks (KEEL_SECRETS_KEY); none can be opened when unset. */
  secrets?: SecretBox;
  /** The worker's live sessions with tool servers (its owner closes them); one session per call when unset. */
  toolSessions?: ToolSessionPool;
  /** How long a tool call that needs a person's approval waits (KEEL_TOOL_APPROVAL_WAIT); 24 h when unset. */
  toolApprovalWaitMs?: number;
}

/** Every activity the worker registers; workflows import only its type. */
export function createActivities(given: ActivityDeps) {
  const secrets = given.secrets ?? NO_SECRET_BOX;
  // A webhook's secret travels sealed (services/delivery-secrets.ts) and is opened only as a request is signed.
  const deps = { ...given, secrets, transports: openingSecrets(given.transports, secrets) };
  const onTextDelta = deps.onTextDelta ?? textDeltaPublisher(deps.pool);
  const prices = deps.prices ?? MODEL_PRICES;
  const rates = deps.rateLimits && { provider: deps.provider.name, limits: deps.rateLimits };
  const tools = {
    ...deps,
    ...(deps.toolSessions ? { sessions: deps.toolSessions } : {}),
    approvalWaitMs: deps.toolApprovalWaitMs ?? TOOL_CALLS.approvalWaitMs,
  };
  const model = { ...deps, prices, rates, onTextDelta, tools };
  const jobs = { ...deps, jobs: deps.jobs ?? DEFAULT_JOB_SETTINGS };
  return {
    ...conversationActivities(deps),
    ...modelActivities(model),
    ...deliveryActivities(deps),
    ...delegationActivities(deps),
    ...deletionActivities(deps),
    ...evalActivities({ ...deps, prices, ...(rates ? { rates } : {}) }),
    ...jobRunActivities(jobs),
    ...jobRunAtOnceActivities({ job: jobs, turn: { model, tools, transports: deps.transports } }),
    ...routineRunActivities({ ...deps, prices, rates, routines: deps.routines ?? DEFAULT_ROUTINE_SETTINGS }),
    ...reflectionActivities({ ...deps, prices, rates, reflection: deps.reflection ?? DEFAULT_REFLECTION_SETTINGS }),
    ...replayActivities(deps),
    ...toolCallActivities(tools),
  };
}

export type KeelActivities = ReturnType<typeof createActivities>;
