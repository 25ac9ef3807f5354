import type { Client } from '@temporalio/client';
import type pg from 'pg';
import { conversationWorkflowId, JOB_CONVERSATION_PREFIX, jobScheduleId } from '../../domain/ids';
import { costOf, MODEL_PRICES, priceOf } from '../../domain/spend';
import type { ReceivedWebhook } from '../../test/support/webhook-receiver';
import type { SentMessage, SoakJob } from './workload';

export type FindingKind = 'lost' | 'duplicated' | 'unaccepted' | 'anomaly';

/** One thing that went wrong (or looks odd), with the ids to look it up by. */
export interface Finding {
  check: 'messages' | 'webhooks' | 'delegates' | 'jobs' | 'spend';
  kind: FindingKind;
  id: string;
  detail: string;
}

export interface CheckRow {
  check: string;
  expected: string;
  observed: string;
  lost: number;
  duplicated: number;
}

export interface CheckResults {
  rows: CheckRow[];
  findings: Finding[];
  lost: number;
  duplicated: number;
  stats: {
    turnStatus: Record<string, number>;
    turnLatencyS: { p50: number; p95: number; max: number };
    /** The slowest turns from acceptance to end: how long recovery from a fault held a message up. */
    slowestTurns: { message: string; turnId: string; latencyS: number; timeline: string }[];
    /** Why job fires were skipped (job_runs.error of skipped rows), with counts. */
    skipReasons: Record<string, number>;
    webhookRequests: number;
    webhookKeys: number;
    retransmissions: { key: string; copies: number }[];
    invalidSignatures: number;
    delegateOutcomes: Record<string, number>;
    jobRuns: Record<string, number>;
    scheduleActions: number;
    missedCatchupWindow: number;
  };
}

const FINISHED = new Set(['replied', 'skipped', 'error', 'interrupted', 'budget_exhausted']);

interface InboundRow {
  conversation_key: string;
  message_id: string;
  turn_id: string;
  accepted_at: Date;
}
interface TurnRow {
  turn_id: string;
  conversation_key: string;
  message_id: string;
  status: string;
  error: { code: string; message: string } | null;
  channel: string;
  reply_text: string | null;
  finished_at: Date | null;
}
interface DeliveryRow {
  effect_key: string;
  turn_id: string | null;
  channel: string;
  outcome: string | null;
  attempts: number;
}
interface DelegateRow {
  delegate_id: string;
  conversation_key: string;
  task_text: string;
  outcome_kind: string | null;
  result: string | null;
  outcome_version: number;
  admitted_version: number;
  relay: string | null;
  completed_at: Date | null;
  terminal_owner: string | null;
  admissions: string;
}
interface RetriggerRow {
  turn_id: string;
  status: string;
  text: string;
}
interface RunRow {
  run_id: string;
  job_id: string;
  status: string;
  attempts: number;
  reply: string | null;
  error: string | null;
  delivery_outcome: string | null;
}

export interface ScheduleActions {
  /** The Schedule's own count of the actions it took. */
  taken: number;
  /** The run workflows it started, from Temporal's visibility (TemporalScheduledById). */
  started: number;
  missedCatchupWindow: number;
}

/**
 * A job's fires: every fire starts one run workflow, which writes one job_runs row (its run_id is the workflow id).
 * The Schedule's count alone falls short when a start succeeded but the scheduler failed to record it (PostgreSQL
 * down under a real Temporal server): its retry then meets the workflow "already running" and leaves it uncounted,
 * though it runs. So the fires are the larger of that count and the run workflows the Schedule started.
 */
export const firesOf = (a: ScheduleActions) => Math.max(a.taken, a.started);

/** What each job's Temporal Schedule says it fired, and the run workflows it started. */
export async function scheduleActions(client: Client, jobs: SoakJob[]): Promise<Map<string, ScheduleActions>> {
  const out = new Map<string, ScheduleActions>();
  for (const job of jobs) {
    if (!job.id) continue;
    const scheduleId = jobScheduleId(job.id);
    const d = await client.schedule.getHandle(scheduleId).describe();
    const started = new Set<string>();
    for await (const w of client.workflow.list({ query: `TemporalScheduledById = '${scheduleId}'` }))
      started.add(w.workflowId);
    out.set(job.id, {
      taken: d.info.numActionsTaken,
      started: started.size,
      missedCatchupWindow: d.info.numActionsMissedCatchupWindow,
    });
  }
  return out;
}

/** Work still under way, for the drain: all zero means everything accepted has ended and been delivered. */
export async function outstanding(
  pool: pg.Pool,
  agentId: string,
  messages: SentMessage[],
  jobs: SoakJob[],
  actions: Map<string, ScheduleActions>,
): Promise<Record<string, number>> {
  const q = async (sql: string, params: unknown[] = [agentId]) =>
    Number((await pool.query<{ n: string }>(sql, params)).rows[0]?.n ?? 0);
  const accepted = messages.filter((m) => m.acceptedAtS !== undefined);
  const keys = accepted.map((m) => conversationWorkflowId(agentId, m.conversationId));
  const ids = accepted.map((m) => m.messageId);
  const answered = await q(
    `SELECT count(*) AS n FROM unnest($1::text[], $2::text[]) AS a(key, id)
       JOIN inbound_messages i ON i.conversation_key = a.key AND i.message_id = a.id
       JOIN turns t ON t.turn_id = i.turn_id WHERE t.status = ANY ($3::text[])`,
    [keys, ids, [...FINISHED]],
  );
  const runRows = await pool.query<{ job_id: string; n: string }>(
    'SELECT job_id, count(*) AS n FROM job_runs GROUP BY job_id',
  );
  const rowsByJob = new Map(runRows.rows.map((r) => [r.job_id, Number(r.n)]));
  let firesWithoutRun = 0;
  for (const job of jobs) {
    const a = job.id ? actions.get(job.id) : undefined;
    if (job.id && a) firesWithoutRun += Math.max(0, firesOf(a) - (rowsByJob.get(job.id) ?? 0));
  }
  return {
    submissions: messages.filter((m) => m.finalStatus === undefined).length,
    unanswered: accepted.length - answered,
    openTurns: await q(
      `SELECT count(*) AS n FROM turns t JOIN conversations c ON c.key = t.conversation_key
        WHERE c.agent_id = $1 AND t.status IN ('queued', 'running')`,
    ),
    unrelayedDelegates: await q('SELECT count(*) AS n FROM delegates WHERE agent_id = $1 AND relay IS NULL'),
    runningJobRuns: await q(
      `SELECT count(*) AS n FROM job_runs r JOIN jobs j ON j.id = r.job_id
        WHERE j.agent_id = $1 AND r.status = 'running'`,
    ),
    firesWithoutRun,
    unsettledDeliveries: await q('SELECT count(*) AS n FROM deliveries WHERE outcome IS NULL', []),
  };
}

function header(r: ReceivedWebhook, name: string): string | undefined {
  const v = r.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Delegate ids a retrigger turn relays, from its synthetic message (`--- delegate <id> (<kind>…) ---`). */
function relayedIds(text: string): string[] {
  return [...text.matchAll(/--- delegate (\S+) \(/g)].map((m) => m[1]!);
}

/**
 * Where a slow turn's time went, in seconds after its message was accepted: its start (the queue and the worker),
 * each model call attempt that answered, its delivery's first and last write, its end.
 */
async function turnTimeline(pool: pg.Pool, turnId: string, acceptedAt: Date): Promise<string> {
  const at = (d: Date | null) => (d ? `+${((d.getTime() - acceptedAt.getTime()) / 1000).toFixed(1)}` : '?');
  const turn = (
    await pool.query<{ started_at: Date | null; finished_at: Date | null }>(
      'SELECT started_at, finished_at FROM turns WHERE turn_id = $1',
      [turnId],
    )
  ).rows[0];
  const calls = (
    await pool.query<{
      call_index: number;
      attempt: number;
      created_at: Date;
      duration_ms: number;
      error: string | null;
    }>('SELECT call_index, attempt, created_at, duration_ms, error FROM model_calls WHERE turn_id = $1 ORDER BY id', [
      turnId,
    ])
  ).rows;
  const sends = (
    await pool.query<{ created_at: Date; updated_at: Date; attempts: number; outcome: string | null }>(
      'SELECT created_at, updated_at, attempts, outcome FROM deliveries WHERE turn_id = $1',
      [turnId],
    )
  ).rows;
  return [
    `started ${at(turn?.started_at ?? null)}`,
    ...calls.map(
      (c) =>
        `model call ${c.call_index}#${c.attempt} done ${at(c.created_at)} ` +
        `(${(c.duration_ms / 1000).toFixed(1)} s${c.error ? `, ${c.error}` : ''})`,
    ),
    ...sends.map(
      (d) => `delivery ${at(d.created_at)}→${at(d.updated_at)} (${d.attempts} attempts, ${d.outcome ?? 'unsettled'})`,
    ),
    `finished ${at(turn?.finished_at ?? null)}`,
  ].join('; ');
}

/**
 * Every check of the soak, from PostgreSQL (the durable record), the receiver's log and the Schedules' counts.
 * Each check counts its own losses: one cause can show in two checks (a relay reply never sent is a lost webhook
 * and an unrelayed delegate), which the findings make plain.
 */
interface CallLedgerRow {
  call_key: string;
  answered: string;
  settled: string;
  answered_tokens: string | null;
  ledger_tokens: string | null;
  input: string | null;
  output: string | null;
  cache_read: string | null;
  cache_write: string | null;
  model: string | null;
  cost: string | null;
  held: string | null;
}

/**
 * (e) Spending matches the ledger: every answered model call of a turn, delegate or job (model_calls, written with
 * the answer) is settled once in model_spend with the same tokens and the price table's cost; nothing is still held;
 * and what was spent is within the budgets the soak set.
 */
async function spendCheck(
  pool: pg.Pool,
  agentId: string,
  budgets: Record<string, number>,
  add: (f: Finding) => void,
): Promise<CheckRow> {
  const { rows } = await pool.query<CallLedgerRow>(
    `WITH answered AS (
       SELECT 'turn:' || turn_id || ':call:' || call_index AS call_key, count(*) AS n,
              sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) AS tokens
         FROM model_calls
        WHERE stop_reason IS NOT NULL AND error IS NULL
          AND (conversation_key IN (SELECT key FROM conversations WHERE agent_id = $1)
               OR conversation_key IN (SELECT conversation_key FROM model_spend WHERE agent_id = $1))
        GROUP BY 1),
     ledger AS (SELECT * FROM model_spend WHERE agent_id = $1 AND kind IN ('turn', 'delegate', 'job'))
     SELECT coalesce(a.call_key, l.call_key) AS call_key, coalesce(a.n, 0) AS answered,
            coalesce(cardinality(l.settled_attempts), 0) AS settled, a.tokens AS answered_tokens,
            l.input_tokens + l.output_tokens + l.cache_read_tokens + l.cache_write_tokens AS ledger_tokens,
            l.input_tokens AS input, l.output_tokens AS output, l.cache_read_tokens AS cache_read,
            l.cache_write_tokens AS cache_write, l.model, l.cost_usd AS cost, l.held_usd AS held
       FROM answered a FULL JOIN ledger l ON l.call_key = a.call_key`,
    [agentId],
  );
  let lost = 0;
  let dup = 0;
  let answered = 0;
  let settled = 0;
  let spent = 0;
  for (const r of rows) {
    const [a, s] = [Number(r.answered), Number(r.settled)];
    answered += a;
    settled += s;
    const cost = Number(r.cost ?? 0);
    spent += cost;
    if (s < a) {
      lost += a - s;
      add({ check: 'spend', kind: 'lost', id: r.call_key, detail: `${a} answers, ${s} settled in the ledger` });
    }
    if (s > a) {
      dup += s - a;
      add({ check: 'spend', kind: 'duplicated', id: r.call_key, detail: `${a} answers, ${s} settled in the ledger` });
    }
    if (a > 0 && s === a && r.answered_tokens !== r.ledger_tokens) {
      const detail = `tokens: ${r.answered_tokens} answered, ${r.ledger_tokens} in the ledger`;
      add({ check: 'spend', kind: 'anomaly', id: r.call_key, detail });
    }
    if (r.model !== null) {
      const usage = {
        inputTokens: Number(r.input),
        outputTokens: Number(r.output),
        cacheReadTokens: Number(r.cache_read),
        cacheWriteTokens: Number(r.cache_write),
      };
      const priced = costOf(usage, priceOf(MODEL_PRICES, r.model));
      if (Math.abs(priced - cost) > 1e-9)
        add({
          check: 'spend',
          kind: 'anomaly',
          id: r.call_key,
          detail: `cost ${cost}, the price table says ${priced}`,
        });
    }
    if (Number(r.held ?? 0) > 0)
      add({ check: 'spend', kind: 'anomaly', id: r.call_key, detail: `still holds $${r.held} after the drain` });
  }
  const daily = budgets.dailyUsd;
  if (daily !== undefined && spent > daily)
    add({
      check: 'spend',
      kind: 'anomaly',
      id: agentId,
      detail: `spent $${spent}, over the daily budget of $${daily}`,
    });
  return {
    check: '(e) spending matches the ledger',
    expected: `${answered} answered model calls → ${answered} settled once, same tokens and cost, nothing held`,
    observed: `${settled} settled, $${spent.toFixed(4)} in all (daily budget $${daily ?? 'none'})`,
    lost,
    duplicated: dup,
  };
}

export async function runChecks(input: {
  pool: pg.Pool;
  agentId: string;
  messages: SentMessage[];
  jobs: SoakJob[];
  received: ReceivedWebhook[];
  actions: Map<string, ScheduleActions>;
  budgets: Record<string, number>;
}): Promise<CheckResults> {
  const { pool, agentId } = input;
  const findings: Finding[] = [];
  const add = (f: Finding) => findings.push(f);

  const inbound = (
    await pool.query<InboundRow>(
      `SELECT i.conversation_key, i.message_id, i.turn_id, i.accepted_at
         FROM inbound_messages i JOIN conversations c ON c.key = i.conversation_key
        WHERE c.agent_id = $1`,
      [agentId],
    )
  ).rows;
  const turns = (
    await pool.query<TurnRow>(
      `SELECT t.turn_id, t.conversation_key, t.message_id, t.status, t.error, t.delivery->>'channel' AS channel,
              m.text AS reply_text, t.finished_at
         FROM turns t JOIN conversations c ON c.key = t.conversation_key
         LEFT JOIN messages m ON m.conversation_key = t.conversation_key AND m.seq = t.reply_seq
        WHERE c.agent_id = $1`,
      [agentId],
    )
  ).rows;
  const deliveries = (
    await pool.query<DeliveryRow>('SELECT effect_key, turn_id, channel, outcome, attempts FROM deliveries')
  ).rows;
  const delegates = (
    await pool.query<DelegateRow>(
      `SELECT d.delegate_id, d.conversation_key, d.task_text, d.outcome_kind, d.result, d.outcome_version,
              d.admitted_version, d.relay, d.completed_at, d.terminal_owner,
              (SELECT count(*) FROM delegate_admissions a
                WHERE a.delegate_id = d.delegate_id AND a.decision = 'admitted') AS admissions
         FROM delegates d WHERE d.agent_id = $1`,
      [agentId],
    )
  ).rows;
  const retriggers = (
    await pool.query<RetriggerRow>(
      `SELECT t.turn_id, t.status, m.text FROM turns t JOIN conversations c ON c.key = t.conversation_key
         JOIN messages m ON m.conversation_key = t.conversation_key AND m.origin = 'retrigger:' || t.turn_id
        WHERE c.agent_id = $1 AND t.message_id LIKE 'retrigger:%'`,
      [agentId],
    )
  ).rows;
  const runs = (
    await pool.query<RunRow>(
      `SELECT r.run_id, r.job_id, r.status, r.attempts, r.reply, r.error, r.delivery_outcome
         FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.agent_id = $1`,
      [agentId],
    )
  ).rows;

  const turnsById = new Map(turns.map((t) => [t.turn_id, t]));
  const inboundByKey = new Map(inbound.map((i) => [`${i.conversation_key}/${i.message_id}`, i]));
  const turnsByMessage = new Map<string, TurnRow[]>();
  for (const t of turns) {
    const k = `${t.conversation_key}/${t.message_id}`;
    turnsByMessage.set(k, [...(turnsByMessage.get(k) ?? []), t]);
  }
  const retriggerById = new Map(retriggers.map((r) => [r.turn_id, r]));

  // ---- (a) every accepted message answered exactly once ----------------------------------------------------------
  const turnStatus: Record<string, number> = {};
  const timed: { message: string; turnId: string; latencyS: number; acceptedAt: Date }[] = [];
  let aLost = 0;
  let aDup = 0;
  const acceptedMessages = input.messages.filter((m) => m.acceptedAtS !== undefined);
  const sentByKey = new Map(
    input.messages.map((m) => [`${conversationWorkflowId(agentId, m.conversationId)}/${m.messageId}`, m]),
  );
  for (const m of input.messages.filter((x) => x.acceptedAtS === undefined)) {
    add({
      check: 'messages',
      kind: 'unaccepted',
      id: m.messageId,
      detail:
        `never accepted by the API (final status ${m.finalStatus ?? 'none'} ` +
        `after ${m.tries.length} tries: ${m.tries.join(',')})`,
    });
  }
  // Every message the client saw accepted, and every one Keel recorded (a 2xx lost on the way must be answered too).
  const toCheck = new Map<string, { key: string; messageId: string; sent?: SentMessage }>();
  for (const m of acceptedMessages) {
    const key = conversationWorkflowId(agentId, m.conversationId);
    toCheck.set(`${key}/${m.messageId}`, { key, messageId: m.messageId, sent: m });
  }
  for (const i of inbound) {
    const k = `${i.conversation_key}/${i.message_id}`;
    if (i.conversation_key.startsWith(conversationWorkflowId(agentId, JOB_CONVERSATION_PREFIX)) || toCheck.has(k))
      continue;
    const sent = sentByKey.get(k);
    if (!sent)
      add({ check: 'messages', kind: 'anomaly', id: k, detail: 'recorded by Keel but never sent by the soak' });
    toCheck.set(k, { key: i.conversation_key, messageId: i.message_id, ...(sent ? { sent } : {}) });
  }
  for (const c of toCheck.values()) {
    const lost = (detail: string) => {
      aLost++;
      add({ check: 'messages', kind: 'lost', id: `${c.key}/${c.messageId}`, detail });
    };
    const rec = inboundByKey.get(`${c.key}/${c.messageId}`);
    if (!rec) {
      lost('accepted (2xx) but not recorded in inbound_messages');
      continue;
    }
    const answeredBy = turnsByMessage.get(`${c.key}/${c.messageId}`) ?? [];
    if (answeredBy.length > 1) {
      aDup += answeredBy.length - 1;
      add({
        check: 'messages',
        kind: 'duplicated',
        id: `${c.key}/${c.messageId}`,
        detail:
          `answered by ${answeredBy.length} turns: ` + answeredBy.map((t) => `${t.turn_id} (${t.status})`).join(', '),
      });
    }
    const turn = turnsById.get(rec.turn_id);
    if (!turn) {
      lost(`its turn ${rec.turn_id} does not exist`);
      continue;
    }
    turnStatus[turn.status] = (turnStatus[turn.status] ?? 0) + 1;
    if (!FINISHED.has(turn.status)) {
      lost(`its turn ${turn.turn_id} is still ${turn.status}`);
      continue;
    }
    if (turn.finished_at)
      timed.push({
        message: `${c.key}/${c.messageId}`,
        turnId: turn.turn_id,
        latencyS: (turn.finished_at.getTime() - rec.accepted_at.getTime()) / 1000,
        acceptedAt: rec.accepted_at,
      });
    if (turn.status !== 'replied') {
      add({
        check: 'messages',
        kind: 'anomaly',
        id: `${c.key}/${c.messageId}`,
        detail:
          `turn ${turn.turn_id} ended ${turn.status}` +
          (turn.error ? `: ${turn.error.code}: ${turn.error.message}` : ''),
      });
      continue;
    }
    const expected = c.sent?.expectedReply;
    const text = turn.reply_text ?? '';
    if (expected && ('exact' in expected ? text !== expected.exact : !text.startsWith(expected.prefix))) {
      lost(
        `turn ${turn.turn_id} replied ${JSON.stringify(text)} ` +
          `instead of ${JSON.stringify('exact' in expected ? expected.exact : `${expected.prefix}…`)}`,
      );
    }
  }
  const latencies = timed.map((x) => x.latencyS).sort((a, b) => a - b);

  // ---- (b) every webhook delivery received once ------------------------------------------------------------------
  const ok = input.received.filter((r) => r.status >= 200 && r.status < 300);
  const keyCounts = new Map<string, number>();
  for (const r of ok) {
    const key = header(r, 'idempotency-key') ?? '(none)';
    keyCounts.set(key, (keyCounts.get(key) ?? 0) + 1);
  }
  const ledger = new Map(deliveries.map((d) => [d.effect_key, d]));
  let bLost = 0;
  let bDup = 0;
  const webhookDeliveries = deliveries.filter((d) => d.channel === 'webhook');
  for (const d of webhookDeliveries) {
    const lost = (detail: string) => {
      bLost++;
      add({ check: 'webhooks', kind: 'lost', id: d.effect_key, detail });
    };
    if (d.outcome === null) lost(`never settled (${d.attempts} attempts)`);
    else if (d.outcome !== 'delivered') lost(`outcome ${d.outcome} after ${d.attempts} attempts`);
    else if (!keyCounts.has(d.effect_key)) lost('the ledger says delivered, the receiver never got the key');
  }
  // A reply or a job result that never reached the ledger was never sent.
  for (const t of turns) {
    if (t.status === 'replied' && t.channel === 'webhook' && !deliveries.some((d) => d.turn_id === t.turn_id)) {
      bLost++;
      add({
        check: 'webhooks',
        kind: 'lost',
        id: t.turn_id,
        detail: 'replied turn with a webhook delivery but no delivery in the ledger',
      });
    }
  }
  for (const r of runs) {
    if (r.status === 'ok' && r.reply && !ledger.has(`${r.run_id}/delivery`)) {
      bLost++;
      add({
        check: 'webhooks',
        kind: 'lost',
        id: r.run_id,
        detail: 'ok job run with a result but no delivery in the ledger',
      });
    }
  }
  // What each received request delivers: a message's answer, a delegate's relay or a job run's result. Two distinct
  // keys for one of them is a duplicate that the receiver could not have recognised.
  const keysByIdentity = new Map<string, Set<string>>();
  const identify = (r: ReceivedWebhook): string[] => {
    const key = header(r, 'idempotency-key') ?? '(none)';
    const body = (r.body ?? {}) as { turnId?: unknown };
    if (typeof body.turnId === 'string') {
      const turn = turnsById.get(body.turnId);
      if (!turn) return [`turn:${body.turnId}`];
      const retrigger = retriggerById.get(turn.turn_id);
      if (retrigger) return relayedIds(retrigger.text).map((id) => `relay:${id}`);
      return [`message:${turn.conversation_key}/${turn.message_id}`];
    }
    const job = /^(.*)\/delivery$/.exec(key);
    return [job ? `jobrun:${job[1]}` : `key:${key}`];
  };
  for (const r of ok) {
    const key = header(r, 'idempotency-key') ?? '(none)';
    if (!ledger.has(key))
      add({ check: 'webhooks', kind: 'anomaly', id: key, detail: 'received a key the effects ledger does not know' });
    for (const id of identify(r)) keysByIdentity.set(id, (keysByIdentity.get(id) ?? new Set()).add(key));
  }
  for (const [id, keys] of keysByIdentity) {
    if (keys.size > 1) {
      bDup += keys.size - 1;
      add({
        check: 'webhooks',
        kind: 'duplicated',
        id,
        detail: `received under ${keys.size} distinct idempotency keys: ${[...keys].join(', ')}`,
      });
    }
  }
  const retransmissions = [...keyCounts].filter(([, n]) => n > 1).map(([key, n]) => ({ key, copies: n }));
  const invalidSignatures = input.received.filter((r) => r.validSignature === false).length;
  if (invalidSignatures)
    add({
      check: 'webhooks',
      kind: 'anomaly',
      id: 'signatures',
      detail: `${invalidSignatures} requests with an invalid signature`,
    });

  // ---- (c) every delegate committed, admitted once and relayed once -----------------------------------------------
  let cLost = 0;
  let cDup = 0;
  const delegateOutcomes: Record<string, number> = {};
  const delegateMessages = acceptedMessages.filter((m) => m.kind === 'delegate');
  for (const m of delegateMessages) {
    const key = conversationWorkflowId(agentId, m.conversationId);
    const mine = delegates.filter((d) => d.conversation_key === key);
    if (mine.length === 0) {
      cLost++;
      add({
        check: 'delegates',
        kind: 'lost',
        id: key,
        detail: 'the spawn message was accepted but no delegate was claimed',
      });
    } else if (mine.length > 1) {
      cDup += mine.length - 1;
      add({
        check: 'delegates',
        kind: 'duplicated',
        id: key,
        detail: `${mine.length} delegates for one spawn: ${mine.map((d) => d.delegate_id).join(', ')}`,
      });
    }
  }
  for (const d of delegates) {
    const lost = (detail: string) => {
      cLost++;
      add({ check: 'delegates', kind: 'lost', id: d.delegate_id, detail });
    };
    if (!d.completed_at || d.outcome_version === 0) {
      lost('its outcome was never committed');
      continue;
    }
    delegateOutcomes[d.outcome_kind ?? 'none'] = (delegateOutcomes[d.outcome_kind ?? 'none'] ?? 0) + 1;
    if (d.outcome_kind !== 'success')
      add({
        check: 'delegates',
        kind: 'anomaly',
        id: d.delegate_id,
        detail: `ended ${d.outcome_kind} (owner ${d.terminal_owner}): ${d.result}`,
      });
    if (d.admitted_version !== d.outcome_version)
      lost(`outcome version ${d.outcome_version} committed, ${d.admitted_version} admitted`);
    const admissions = Number(d.admissions);
    if (admissions > 1) {
      cDup += admissions - 1;
      add({ check: 'delegates', kind: 'duplicated', id: d.delegate_id, detail: `admitted ${admissions} times` });
    }
    if (d.relay !== 'relayed') lost(`relay is ${d.relay ?? 'not recorded'}`);
    const relayTurns = retriggers.filter((r) => relayedIds(r.text).includes(d.delegate_id));
    if (relayTurns.length === 0) lost('no retrigger turn relayed it');
    else if (relayTurns.length > 1) {
      cDup += relayTurns.length - 1;
      add({
        check: 'delegates',
        kind: 'duplicated',
        id: d.delegate_id,
        detail:
          `relayed by ${relayTurns.length} retrigger turns: ` +
          relayTurns.map((r) => `${r.turn_id} (${r.status})`).join(', '),
      });
    }
    for (const r of relayTurns) if (r.status !== 'replied') lost(`retrigger turn ${r.turn_id} ended ${r.status}`);
    if (relayTurns.length > 0 && !keysByIdentity.has(`relay:${d.delegate_id}`))
      lost('the relay reply never reached the receiver');
  }

  // ---- (d) every job run booked, every ok result received --------------------------------------------------------
  let dLost = 0;
  let dDup = 0;
  const jobRuns: Record<string, number> = {};
  const skipReasons: Record<string, number> = {};
  for (const r of runs)
    if (r.status === 'skipped') skipReasons[r.error ?? 'none'] = (skipReasons[r.error ?? 'none'] ?? 0) + 1;
  const jobById = new Map(input.jobs.filter((j) => j.id).map((j) => [j.id!, j]));
  for (const r of runs) {
    jobRuns[r.status] = (jobRuns[r.status] ?? 0) + 1;
    const lost = (detail: string) => {
      dLost++;
      add({ check: 'jobs', kind: 'lost', id: r.run_id, detail });
    };
    if (r.status === 'running') lost('never booked (still running)');
    else if (r.status === 'error')
      add({
        check: 'jobs',
        kind: 'anomaly',
        id: r.run_id,
        detail: `booked as error after ${r.attempts} attempts: ${r.error}`,
      });
    else if (r.status === 'ok') {
      const expected = `echo: ${jobById.get(r.job_id)?.task ?? '?'}`;
      if (r.reply !== expected) lost(`result ${JSON.stringify(r.reply)} instead of ${JSON.stringify(expected)}`);
      else if (r.delivery_outcome !== 'delivered') lost(`booked ok with delivery ${r.delivery_outcome ?? 'none'}`);
      else if (!keyCounts.has(`${r.run_id}/delivery`)) lost('booked delivered, the receiver never got it');
    }
  }
  let scheduleTaken = 0;
  let missedCatchupWindow = 0;
  for (const job of input.jobs) {
    if (!job.id) {
      dLost++;
      add({ check: 'jobs', kind: 'lost', id: job.name, detail: 'created, but its id was never learned' });
      continue;
    }
    const a = input.actions.get(job.id) ?? { taken: 0, started: 0, missedCatchupWindow: 0 };
    const fires = firesOf(a);
    scheduleTaken += fires;
    missedCatchupWindow += a.missedCatchupWindow;
    const rows = runs.filter((r) => r.job_id === job.id).length;
    if (rows < fires) {
      dLost += fires - rows;
      add({
        check: 'jobs',
        kind: 'lost',
        id: job.id,
        detail: `its Schedule fired ${fires} times, ${rows} fires have a run row`,
      });
    } else if (rows > fires) {
      dDup += rows - fires;
      add({ check: 'jobs', kind: 'duplicated', id: job.id, detail: `${rows} run rows for ${fires} Schedule fires` });
    }
    if (a.started > a.taken)
      add({
        check: 'jobs',
        kind: 'anomaly',
        id: job.id,
        detail:
          `its Schedule started ${a.started} run workflows but counts ${a.taken} actions: Temporal started ` +
          `${a.started - a.taken} without recording it, and its retry found the workflow already running`,
      });
    if (a.missedCatchupWindow > 0)
      add({
        check: 'jobs',
        kind: 'anomaly',
        id: job.id,
        detail: `${a.missedCatchupWindow} fires missed the catch-up window`,
      });
  }
  // A job run's turn is a message of the job's conversation: one turn per message.
  for (const [k, ts] of turnsByMessage) {
    if (k.startsWith(conversationWorkflowId(agentId, JOB_CONVERSATION_PREFIX)) && ts.length > 1) {
      dDup += ts.length - 1;
      add({ check: 'jobs', kind: 'duplicated', id: k, detail: `${ts.length} turns for one run attempt` });
    }
  }

  const acceptedChat = acceptedMessages.length;
  const rows: CheckRow[] = [
    {
      check: '(a) accepted messages answered once',
      expected: `${acceptedChat} accepted → ${acceptedChat} ended turns, 1 each`,
      observed: `${
        Object.entries(turnStatus)
          .map(([s, n]) => `${s} ${n}`)
          .join(', ') || 'none'
      }${toCheck.size > acceptedChat ? ` (incl. ${toCheck.size - acceptedChat} recorded without a 2xx)` : ''}`,
      lost: aLost,
      duplicated: aDup,
    },
    {
      check: '(b) webhook deliveries received once',
      expected: `${webhookDeliveries.length} ledger deliveries received, 1 key per reply`,
      observed: `${keyCounts.size} keys in ${ok.length} requests; retransmitted keys: ${retransmissions.length}`,
      lost: bLost,
      duplicated: bDup,
    },
    {
      check: '(c) delegates committed, relayed once',
      expected: `${delegateMessages.length} delegates, each committed, admitted, relayed 1×`,
      observed: `${delegates.length} delegates: ${
        Object.entries(delegateOutcomes)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ') || 'none'
      }; relayed ${delegates.filter((d) => d.relay === 'relayed').length}`,
      lost: cLost,
      duplicated: cDup,
    },
    {
      check: '(d) job runs booked, results received',
      expected: `${scheduleTaken} Schedule fires → ${scheduleTaken} booked runs`,
      observed: `${runs.length} runs: ${
        Object.entries(jobRuns)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ') || 'none'
      }`,
      lost: dLost,
      duplicated: dDup,
    },
    await spendCheck(pool, agentId, input.budgets, add),
  ];
  return {
    rows,
    findings,
    lost: rows.reduce((n, r) => n + r.lost, 0),
    duplicated: rows.reduce((n, r) => n + r.duplicated, 0),
    stats: {
      turnStatus,
      turnLatencyS: {
        p50: percentile(latencies, 50),
        p95: percentile(latencies, 95),
        max: latencies[latencies.length - 1] ?? 0,
      },
      slowestTurns: await Promise.all(
        timed
          .sort((a, b) => b.latencyS - a.latencyS)
          .slice(0, 5)
          .map(async (x) => ({
            message: x.message,
            turnId: x.turnId,
            latencyS: x.latencyS,
            timeline: await turnTimeline(pool, x.turnId, x.acceptedAt),
          })),
      ),
      skipReasons,
      webhookRequests: input.received.length,
      webhookKeys: keyCounts.size,
      retransmissions,
      invalidSignatures,
      delegateOutcomes,
      jobRuns,
      scheduleActions: scheduleTaken,
      missedCatchupWindow,
    },
  };
}
