import type { ChildProcess } from 'node:child_process';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId, delegateWorkflowId, jobConversationId, jobScheduleId } from '../domain/ids';
import { stopProcess } from '../scripts/processes';
import { eventually, settledHistory, startTestKeel, uniqueId, type SubmitAnswer, type TestKeel } from './support/keel';
import { identityOf, localStepsOf, startWorkerProcess, waitForPollers } from './support/workers';

/**
 * Claims under real concurrency: an API and two worker processes on one task queue, and claims released at the same
 * instant. A table lock held by the test lines the claims up: each claim blocks on its first read of the table, and
 * all of them go on together when the lock is released. Which worker runs which claim is Temporal's choice, so a
 * scenario is repeated (a few rounds at most) until its claims ran in both processes.
 */
let keel: TestKeel;
let workers: ChildProcess[] = [];
beforeAll(async () => {
  keel = await startTestKeel({ worker: false });
  workers = [startWorkerProcess(keel, inject('databaseUrl')), startWorkerProcess(keel, inject('databaseUrl'))];
  await waitForPollers(keel, workers);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => stopProcess(w)));
  await keel?.stop();
});

const MAX_ROUNDS = 8;

async function api<T>(method: 'GET' | 'POST', url: string, body?: unknown): Promise<{ status: number; body: T }> {
  const headers = { 'content-type': 'application/json' };
  const payload = body === undefined ? {} : { headers, payload: JSON.stringify(body) };
  const res = await keel.api.inject({ method, url, ...payload });
  return { status: res.statusCode, body: res.json<T>() };
}

/** Which worker process an identity from a history belongs to (0 or 1). */
const workerOf = (identity: string) => workers.findIndex((w) => identity.startsWith(identityOf(w)));

/**
 * Holds `table` in ACCESS EXCLUSIVE mode until `waiting` sessions wait for it, then releases it: everything that
 * was started meanwhile reaches the table at the same instant.
 */
async function releasedTogether<T>(table: 'tasks' | 'job_runs', waiting: number, start: () => T): Promise<T> {
  const db = await keel.pool.connect();
  try {
    await db.query('BEGIN');
    await db.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    const started = start();
    await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ n: string }>(
          'SELECT count(*) AS n FROM pg_locks WHERE relation = $1::regclass AND NOT granted',
          [table],
        );
        return Number(rows[0]!.n) >= waiting;
      },
      60_000,
      `${waiting} sessions waiting for ${table}`,
    );
    await db.query('COMMIT');
    return started;
  } finally {
    db.release();
  }
}

/** Child workflows a workflow's history started, by workflow id. */
async function startedChildren(workflowId: string): Promise<string[]> {
  const history = await settledHistory(keel, workflowId);
  return (history.events ?? []).flatMap((e) => e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId ?? []);
}

describe('a task claimed by three conversations at the same instant, on two workers', () => {
  /** One round: three conversations of a fresh agent spawn a delegate for task #1 at once. */
  async function round(): Promise<number[]> {
    const a = uniqueId('a');
    const conversations = ['c1', 'c2', 'c3'];
    const task = { title: 'Shared work', description: '/delay 3000 shared work', status: 'ready' };
    expect((await api('POST', `/v1/agents/${a}/tasks`, task)).status).toBe(201);

    const spawn = { text: '/tool spawn_delegate {"task":1}' };
    const posts = await releasedTogether('tasks', 3, () =>
      conversations.map((c) => keel.post(a, c, spawn, { wait: 60 })),
    );
    const answers: SubmitAnswer[] = (await Promise.all(posts)).map((p) => p.body);
    expect(answers.map((x) => x.status)).toEqual(['replied', 'replied', 'replied']);

    // Exactly one spawned; the other two say why they were refused, naming the delegate that holds the task.
    const texts = answers.map((x) => x.reply?.text ?? '');
    const winners = texts.flatMap((t) => /^tool result: spawned delegate (\S+) for task #1;/.exec(t)?.[1] ?? []);
    expect(winners).toHaveLength(1);
    const winner = winners[0]!;
    const refusal = `tool error: not spawned: task #1 already has an open attempt (delegate ${winner})`;
    expect(texts.filter((t) => !t.includes(`spawned delegate ${winner} for task #1`))).toEqual([refusal, refusal]);

    // A refused claim starts nothing: one delegate row, one task attempt, and one child workflow in the three
    // conversations' histories (each turn has ended, so any start it made is in its history by now).
    const delegatesOf = async (table: 'delegates' | 'task_attempts') => {
      const sql = `SELECT delegate_id FROM ${table} WHERE agent_id = $1`;
      const { rows } = await keel.pool.query<{ delegate_id: string }>(sql, [a]);
      return rows.map((r) => r.delegate_id);
    };
    expect(await delegatesOf('delegates')).toEqual([winner]);
    expect(await delegatesOf('task_attempts')).toEqual([winner]);
    const children = await Promise.all(conversations.map((c) => startedChildren(conversationWorkflowId(a, c))));
    expect(children.flat()).toEqual([delegateWorkflowId(a, winner)]);
    // Temporal's own list agrees: one delegate workflow for the agent.
    const query = `KeelAgentId = '${a}' AND KeelKind = 'delegate'`;
    const listed = await eventually(
      async () => {
        const ids: string[] = [];
        for await (const w of keel.client.workflow.list({ query })) ids.push(w.workflowId);
        return ids.length > 0 ? ids : undefined;
      },
      30_000,
      'the delegate workflow to be listed',
    );
    expect(listed).toEqual([delegateWorkflowId(a, winner)]);

    // Each conversation's claim is a local step of its turn: the worker that ran it recorded its marker.
    const claimedBy = await Promise.all(
      conversations.map((c) => localStepsOf(keel, conversationWorkflowId(a, c), 'claimDelegate')),
    );
    expect(claimedBy.map((w) => w.length)).toEqual([1, 1, 1]);
    return claimedBy.flat().map((step) => workerOf(step.identity));
  }

  it('one delegate workflow, two refusals that say why, and the refused claims start nothing', async () => {
    let spread = false;
    for (let r = 1; r <= MAX_ROUNDS && !spread; r++) spread = new Set(await round()).size === 2;
    // The claims of at least one round ran in both worker processes.
    expect(spread).toBe(true);
  }, 300_000);
});

describe('two fires of one job at the same instant, on two workers', () => {
  interface Run {
    runId: string;
    status: string;
    error?: string;
  }

  /** One round: a Schedule backfill fires a fresh job twice at once. */
  async function round(): Promise<number[]> {
    const a = uniqueId('a');
    // Daily, twelve hours from now: no fire of its own during the test; the backfill below supplies exactly two.
    const hour = (new Date().getUTCHours() + 12) % 24;
    const job = { name: 'Nightly', schedule: { kind: 'cron', expr: `0 ${hour} * * *` }, task: '/delay 1500 only once' };
    const created = await api<{ id: string }>('POST', `/v1/agents/${a}/jobs`, job);
    expect(created.status).toBe(201);
    const jobId = created.body.id;
    const schedule = keel.client.schedule.getHandle(jobScheduleId(jobId));
    // A 48-hour window holds exactly two daily fires; with ALLOW_ALL the Schedule starts both at once.
    const end = new Date(Date.now() - 3_600_000);
    const start = new Date(end.getTime() - 48 * 3_600_000);
    const overlap = ScheduleOverlapPolicy.ALLOW_ALL;
    await releasedTogether('job_runs', 2, () => schedule.backfill([{ start, end, overlap }]));

    // Both fires' workflows have ended before their runs are read: nothing of either is still to come.
    const fires = await eventually(
      async () => {
        const actions = (await schedule.describe()).info.recentActions;
        return actions.length >= 2 ? actions : undefined;
      },
      30_000,
      'both fires to start',
    );
    expect(fires).toHaveLength(2);
    await Promise.all(fires.map((f) => keel.client.workflow.getHandle(f.action.workflow.workflowId).result()));
    const runs = (await api<Run[]>('GET', `/v1/agents/${a}/jobs/${jobId}/runs`)).body;
    expect(runs.map((r) => r.status).sort()).toEqual(['ok', 'skipped']);
    // Busy (the other fire holds the job), or stale (the other fire is the later one): either way, why is recorded.
    const skipped = runs.find((r) => r.status === 'skipped')!;
    expect(['the previous run was still running', 'a later fire has already run']).toContain(skipped.error);

    // The skipped fire starts no turn: the job's conversation holds one task message and one model call (a run's
    // beginning records its task, and calls the model, only when it runs: runJobAtOnce).
    const key = conversationWorkflowId(a, jobConversationId(jobId));
    const { rows } = await keel.pool.query<{ text: string }>(
      `SELECT text FROM messages WHERE conversation_key = $1 AND role = 'user'`,
      [key],
    );
    expect(rows.map((r) => r.text)).toEqual(['/delay 1500 only once']);
    const calls = await keel.pool.query('SELECT 1 FROM model_calls WHERE conversation_key = $1', [key]);
    expect(calls.rowCount).toBe(1);

    // Each fire's begin is a local step of its run: the worker that ran it recorded its marker.
    const begunBy = await Promise.all(runs.map((r) => localStepsOf(keel, r.runId, 'runJobAtOnce')));
    expect(begunBy.map((w) => w.length)).toEqual([1, 1]);
    return begunBy.flat().map((step) => workerOf(step.identity));
  }

  it('one run ok, one skipped with its reason, and the skipped fire starts no turn', async () => {
    // A fire's begin is a local step of its run's first workflow task, and Temporal hands two tasks that arrive
    // together to the same worker's waiting polls: each round's two claims run at once on two PostgreSQL sessions of
    // one process, and the rounds move between the processes. Every round holds; both processes claim in some round.
    const claimants = new Set<number>();
    for (let r = 1; r <= MAX_ROUNDS && (r <= 2 || claimants.size < 2); r++)
      for (const w of await round()) claimants.add(w);
    expect([...claimants].sort()).toEqual([0, 1]);
  }, 300_000);
});
