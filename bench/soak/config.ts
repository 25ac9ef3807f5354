/** The soak's knobs, from the environment (defaults: the workload, about 3.5 minutes of load). */
export interface SoakConfig {
  /** Seconds of load (messages, job fires, delegates, faults); the drain comes after. */
  loadSeconds: number;
  /** How long the drain may wait for everything accepted to finish before the checks run anyway. */
  drainSeconds: number;
  conversations: number;
  /** Messages per conversation (sent in pairs: a slow one, then one that queues behind it). */
  messagesPerConversation: number;
  jobs: number;
  delegates: number;
  /** Seconds between two kill -9 of a worker (a random one when there are several); 0: no kills. */
  killEverySeconds: number;
  /**
   * When one API is killed with kill -9 (requests in flight to it) and started again, as a fraction of the load
   * phase; negative: never (the default of the dev soak, whose only API would take the whole workload down with it).
   */
  apiKillAt: number;
  /** When the Temporal server (dev or cluster) and PostgreSQL restart, as a fraction of the load; negative: never. */
  temporalRestartAt: number;
  postgresRestartAt: number;
  postgresDownMs: number;
  /** The jobs' `every` interval, and Keel's floor for it (the default floor of 60 s would give a handful of fires). */
  jobIntervalMs: number;
  jobFloorMs: number;
  /** Keel's job retry backoff (KEEL_JOB_BACKOFF_MS), short so a failed run retries within the soak. */
  jobBackoffMs: string;
  agentId: string;
  /** Self-test of the checks: the receiver refuses the first N deliveries for good (404), which must show as losses. */
  receiverRefuseFirst: number;
  /**
   * The agent's budgets for the whole soak: every model call reserves and settles against them, under the faults.
   * Large enough that none stops a call: the soak checks that the ledger adds up, not what a stop does.
   */
  budgets: Record<string, number>;
}

function num(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name}=${raw}: expected a number ≥ ${min}`);
  return value;
}

export function soakConfig(env: NodeJS.ProcessEnv = process.env, opts: { cluster?: boolean } = {}): SoakConfig {
  const jobFloorMs = num(env, 'SOAK_JOB_FLOOR_MS', 5_000, 1);
  return {
    loadSeconds: num(env, 'SOAK_SECONDS', 210, 10),
    drainSeconds: num(env, 'SOAK_DRAIN_SECONDS', 360, 10),
    conversations: Math.floor(num(env, 'SOAK_CONVERSATIONS', 50, 0)),
    messagesPerConversation: Math.floor(num(env, 'SOAK_MESSAGES', 4, 1)),
    jobs: Math.floor(num(env, 'SOAK_JOBS', 20, 0)),
    delegates: Math.floor(num(env, 'SOAK_DELEGATES', 10, 0)),
    killEverySeconds: num(env, 'SOAK_KILL_EVERY_S', 20, 0),
    apiKillAt: num(env, 'SOAK_API_KILL_AT', opts.cluster ? 0.5 : -1, -1),
    temporalRestartAt: num(env, 'SOAK_TEMPORAL_RESTART_AT', 0.35, -1),
    postgresRestartAt: num(env, 'SOAK_POSTGRES_RESTART_AT', 0.65, -1),
    postgresDownMs: num(env, 'SOAK_POSTGRES_DOWN_MS', 5_000, 0),
    jobIntervalMs: num(env, 'SOAK_JOB_INTERVAL_MS', jobFloorMs, jobFloorMs),
    jobFloorMs,
    jobBackoffMs: env.SOAK_JOB_BACKOFF_MS ?? '1000',
    agentId: env.SOAK_AGENT ?? 'soak',
    receiverRefuseFirst: Math.floor(num(env, 'SOAK_RECEIVER_REFUSE_FIRST', 0, 0)),
    budgets: {
      dailyUsd: num(env, 'SOAK_DAILY_USD', 100, 0),
      monthlyUsd: 1_000,
      perTurnUsd: 1,
      perDelegateTreeUsd: 5,
      perJobRunUsd: 1,
    },
  };
}
