import { callWithRetry, type ApiRing } from './client';
import type { SoakConfig } from './config';

/** Where every reply and job result goes: the soak's receiver, signed so signatures are checked under faults too. */
export interface WebhookTarget {
  channel: 'webhook';
  url: string;
  secret: string;
}

export interface SentMessage {
  conversationId: string;
  messageId: string;
  text: string;
  kind: 'chat' | 'delegate';
  /** The reply its turn must give: exactly this text, or (a delegate's spawn, whose id is not known) this prefix. */
  expectedReply: { exact: string } | { prefix: string };
  /** Seconds after the soak's start. */
  plannedAtS: number;
  sentAtS?: number;
  /** When the API answered 2xx; undefined: never accepted (the client gave up at the deadline). */
  acceptedAtS?: number;
  finalStatus?: number;
  tries: (number | 'network')[];
  turnId?: string;
}

export interface SoakJob {
  index: number;
  name: string;
  task: string;
  id?: string;
  createTries: (number | 'network')[];
  pauseStatus?: number;
  pauseTries: (number | 'network')[];
}

export const conversationIdOf = (i: number) => `soak-c${i}`;
export const delegateConversationIdOf = (n: number) => `soak-del-${n}`;
export const jobTaskOf = (j: number) => `soak job ${j}`;
export const delegateTaskOf = (n: number) => `/work 3 300 soak task ${n}`;

/**
 * The messages of the soak with their send times. Conversation messages come in pairs 300 ms apart: a slow one
 * (`/delay`, so kills land mid-turn) and one that queues behind it; one in four fails its first model call
 * (`/fail 1`, retried by Temporal). Pairs and delegates are spread over the first 90% of the load.
 */
export function planMessages(cfg: SoakConfig): SentMessage[] {
  const spread = cfg.loadSeconds * 0.9;
  const pairs = Math.ceil(cfg.messagesPerConversation / 2);
  const messages: SentMessage[] = [];
  for (let i = 0; i < cfg.conversations; i++) {
    for (let k = 0; k < cfg.messagesPerConversation; k++) {
      const pair = Math.floor(k / 2);
      const base = `soak c${i} m${k}`;
      const text = k % 2 === 0 ? `/delay 2500 ${base}` : k % 4 === 3 ? `/fail 1 ${base}` : base;
      messages.push({
        conversationId: conversationIdOf(i),
        messageId: `soak-c${i}-m${k}`,
        text,
        kind: 'chat',
        expectedReply: { exact: `echo: ${base}` },
        plannedAtS: round(((pair + (i + 0.5) / Math.max(1, cfg.conversations)) / pairs) * spread + (k % 2) * 0.3),
        tries: [],
      });
    }
  }
  for (let n = 0; n < cfg.delegates; n++) {
    messages.push({
      conversationId: delegateConversationIdOf(n),
      messageId: `soak-del-${n}`,
      text: `/tool spawn_delegate ${JSON.stringify({ text: delegateTaskOf(n), historyMode: 'clean' })}`,
      kind: 'delegate',
      expectedReply: { prefix: 'tool result: spawned delegate ' },
      plannedAtS: round(((n + 0.5) / cfg.delegates) * spread),
      tries: [],
    });
  }
  return messages.sort((a, b) => a.plannedAtS - b.plannedAtS);
}

const round = (s: number) => Math.round(s * 10) / 10;
const sleepUntil = (epochMs: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, epochMs - Date.now())));

/**
 * Sends each message at its time, without waiting for its turn (202), and retries a failed submission with the
 * same messageId until it is accepted or `deadline` passes: the API is idempotent on messageId.
 */
export async function sendMessages(
  ring: ApiRing,
  agentId: string,
  target: WebhookTarget,
  messages: SentMessage[],
  t0: number,
  deadline: number,
): Promise<void> {
  await Promise.all(
    messages.map(async (m) => {
      await sleepUntil(t0 + m.plannedAtS * 1000);
      m.sentAtS = round((Date.now() - t0) / 1000);
      const res = await callWithRetry(
        ring,
        `/v1/agents/${agentId}/conversations/${m.conversationId}/messages`,
        { method: 'POST', body: { text: m.text, messageId: m.messageId, delivery: target } },
        deadline,
      );
      m.tries = res.tries;
      m.finalStatus = res.status;
      if (res.status >= 200 && res.status < 300) {
        m.acceptedAtS = round((Date.now() - t0) / 1000);
        const turnId = (res.body as { turnId?: unknown } | undefined)?.turnId;
        if (typeof turnId === 'string') m.turnId = turnId;
      }
    }),
  );
}

/** Creates the jobs (before the faults start). A retried creation that meets its own name (409) looks the job up. */
/** The agent, with the soak's budgets, before any work. */
export async function setBudgets(ring: ApiRing, cfg: SoakConfig, deadline: number): Promise<void> {
  const res = await callWithRetry(
    ring,
    `/v1/agents/${cfg.agentId}`,
    { method: 'PUT', body: { name: cfg.agentId, budgets: cfg.budgets } },
    deadline,
  );
  if (res.status !== 200 && res.status !== 201)
    throw new Error(`soak: setting the budgets answered ${res.status} ${JSON.stringify(res.body)}`);
}

export async function createJobs(
  ring: ApiRing,
  cfg: SoakConfig,
  target: WebhookTarget,
  deadline: number,
): Promise<SoakJob[]> {
  const jobs: SoakJob[] = [];
  for (let j = 0; j < cfg.jobs; j++) {
    const job: SoakJob = { index: j, name: `soak-job-${j}`, task: jobTaskOf(j), createTries: [], pauseTries: [] };
    const res = await callWithRetry(
      ring,
      `/v1/agents/${cfg.agentId}/jobs`,
      {
        method: 'POST',
        body: {
          name: job.name,
          schedule: { kind: 'every', intervalMs: cfg.jobIntervalMs },
          task: job.task,
          delivery: target,
        },
      },
      deadline,
    );
    job.createTries = res.tries;
    const id = (res.body as { id?: unknown } | undefined)?.id;
    if (res.status === 201 && typeof id === 'string') job.id = id;
    else if (res.status === 409) job.id = await findJobId(ring, cfg.agentId, job.name, deadline);
    else throw new Error(`soak: creating job ${job.name} answered ${res.status} ${JSON.stringify(res.body)}`);
    jobs.push(job);
  }
  return jobs;
}

async function findJobId(ring: ApiRing, agentId: string, name: string, deadline: number): Promise<string | undefined> {
  const res = await callWithRetry(ring, `/v1/agents/${agentId}/jobs`, { method: 'GET' }, deadline);
  const list = Array.isArray(res.body) ? (res.body as { id?: unknown; name?: unknown }[]) : [];
  const found = list.find((j) => j.name === name)?.id;
  return typeof found === 'string' ? found : undefined;
}

/** Pauses every job so that the number of fires is bounded (a 409 means it was paused already: fine). */
export async function pauseJobs(ring: ApiRing, agentId: string, jobs: SoakJob[], deadline: number): Promise<void> {
  await Promise.all(
    jobs.map(async (job) => {
      if (!job.id) return;
      const res = await callWithRetry(ring, `/v1/agents/${agentId}/jobs/${job.id}/pause`, { method: 'POST' }, deadline);
      job.pauseTries = res.tries;
      job.pauseStatus = res.status;
    }),
  );
}
