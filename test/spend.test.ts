import type { ChildProcess } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { defaultPayloadConverter } from '@temporalio/common';
import { Pool } from 'pg';
import { reserve } from '../db/spend';
import { conversationWorkflowId, delegateWorkflowId } from '../domain/ids';
import { budgetsFor } from '../domain/spend';
import { stopProcess } from '../scripts/processes';
import { eventually, settledHistory, startTestKeel, streamingText, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';
import { author, routineApi } from './support/routines';
import { startWebhookReceiver } from './support/webhook-receiver';
import { startWorkerProcess } from './support/workers';

let keel: TestKeel;
beforeAll(async () => {
  keel = await startTestKeel();
});
afterAll(async () => keel?.stop());
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function call<T>(k: TestKeel, method: 'GET' | 'PUT', url: string, body?: unknown) {
  const res = await k.api.inject({
    method,
    url,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json<T>() };
}

interface Ledger {
  calls: number;
  costUsd: number;
  heldUsd: number;
  reservedUsd: number;
}

/** The spend ledger of an agent, straight from PostgreSQL. */
async function ledger(k: TestKeel, agentId: string): Promise<Ledger> {
  const { rows } = await k.pool.query<{ calls: string; cost: string; held: string; reserved: string }>(
    `SELECT coalesce(sum(cardinality(settled_attempts)), 0) AS calls, coalesce(sum(cost_usd), 0) AS cost,
            coalesce(sum(held_usd), 0) AS held, coalesce(max(reserved_usd), 0) AS reserved
       FROM model_spend WHERE agent_id = $1`,
    [agentId],
  );
  const r = rows[0]!;
  return { calls: Number(r.calls), costUsd: Number(r.cost), heldUsd: Number(r.held), reservedUsd: Number(r.reserved) };
}

describe('a daily budget, from the REST API alone (the README sequence)', () => {
  it('allows three turns, stops the fourth naming the budget, lets the next through once raised', async () => {
    const a = uniqueId('a');
    const put = await call<{ budgets: unknown }>(keel, 'PUT', `/v1/agents/${a}`, {
      name: a,
      budgets: { dailyUsd: 0.075 },
    });
    expect(put).toMatchObject({ status: 200, body: { budgets: { dailyUsd: 0.075 } } });

    for (const text of ['one', 'two', 'three']) {
      expect((await keel.post(a, 'c1', { text }, { wait: 30 })).body).toMatchObject({
        status: 'replied',
        reply: { text: `echo: ${text}` },
      });
    }
    const fourth = await keel.post(a, 'c1', { text: 'four' }, { wait: 30 });
    expect(fourth.body.status).toBe('budget_exhausted');
    expect(fourth.body.error?.code).toBe('budget_exhausted');
    expect(fourth.body.error?.message).toBe(
      'the daily budget of $0.075 is spent: $0.0105 spent and $0.00 reserved, and this call could cost up to $0.0659',
    );

    const spent = await ledger(keel, a);
    expect(spent.calls).toBe(3);
    expect(spent.heldUsd).toBe(0);
    const budgets = await call<{ budgets: Record<string, unknown>[] }>(keel, 'GET', `/v1/agents/${a}/budgets`);
    expect(budgets.body.budgets).toEqual([
      {
        name: 'dailyUsd',
        limitUsd: 0.075,
        counts: 'today (UTC)',
        spentUsd: spent.costUsd,
        reservedUsd: 0,
        leftUsd: 0.075 - spent.costUsd,
      },
    ]);

    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, budgets: { dailyUsd: 0.2 } });
    expect((await keel.post(a, 'c1', { text: 'five' }, { wait: 30 })).body).toMatchObject({
      status: 'replied',
      reply: { text: 'echo: five' },
    });

    const usage = await call<{ total: { calls: number; costUsd: number }; groups: { key: string }[] }>(
      keel,
      'GET',
      `/v1/agents/${a}/usage?groupBy=conversation`,
    );
    const after = await ledger(keel, a);
    expect(usage.body.total.calls).toBe(4);
    expect(usage.body.total.costUsd).toBeCloseTo(after.costUsd, 12);
    expect(usage.body.groups.map((g) => g.key)).toEqual([conversationWorkflowId(a, 'c1')]);
    // A range that ends before it starts holds nothing (the fuzz run found it answered 400 once).
    const empty = await call<{ total: { calls: number }; groups: unknown[] }>(
      keel,
      'GET',
      `/v1/agents/${a}/usage?from=2026-02-01T00:00:00Z&to=0020-02-29T00:00:00Z`,
    );
    expect(empty).toMatchObject({ status: 200, body: { total: { calls: 0 }, groups: [] } });
    // Every call that answered is in model_calls too, with the same tokens.
    const { rows } = await keel.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM model_calls WHERE conversation_key = $1 AND stop_reason IS NOT NULL`,
      [conversationWorkflowId(a, 'c1')],
    );
    expect(Number(rows[0]!.n)).toBe(4);
    // The day's and the month's totals, which reservations read, are the ledger's sum.
    const totals = await keel.pool.query<{ period: string; spent_usd: string }>(
      'SELECT period, spent_usd FROM spend_totals WHERE agent_id = $1 ORDER BY period',
      [a],
    );
    const today = new Date().toISOString();
    expect(totals.rows.map((t) => t.period)).toEqual([`day:${today.slice(0, 10)}`, `month:${today.slice(0, 7)}`]);
    for (const t of totals.rows) expect(Number(t.spent_usd)).toBeCloseTo(after.costUsd, 12);

    const metrics = (await keel.api.inject({ method: 'GET', url: '/metrics' })).body;
    const series = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(series(`keel_spend_usd_total\\{agent="${a}"\\}`)).toBeCloseTo(after.costUsd, 12);
    expect(series(`keel_budget_remaining_usd\\{agent="${a}",budget="dailyUsd"\\}`)).toBeCloseTo(
      0.2 - after.costUsd,
      12,
    );
    const inTokens = await keel.pool.query<{ n: string }>(
      'SELECT sum(input_tokens) AS n FROM model_spend WHERE agent_id = $1',
      [a],
    );
    expect(Number(inTokens.rows[0]!.n)).toBeGreaterThan(0);
    // Each model call's result, as the Temporal UI shows it, carries its tokens and cost.
    const history = await settledHistory(keel, conversationWorkflowId(a, 'c1'));
    const results = (history.events ?? []).flatMap((e) => {
      // Every local step's result (a turn's steps are local activities), some of which answer nothing (null).
      const payload = e.markerRecordedEventAttributes?.details?.result?.payloads?.[0];
      const value = payload
        ? defaultPayloadConverter.fromPayload<{ spend?: { costUsd: number } } | null>(payload)
        : null;
      return value?.spend ? [value.spend.costUsd] : [];
    });
    expect(results).toHaveLength(4);
    expect(results.reduce((x, y) => x + y, 0)).toBeCloseTo(after.costUsd, 12);
    expect(metrics).toMatch(/^keel_model_tokens_total\{kind="turn",model="scripted",direction="in"\} \d+$/m);
  });

  it('tells the owner once per budget and period, however many calls it stops', async () => {
    const a = uniqueId('a');
    const hook = await startWebhookReceiver();
    cleanups.push(() => hook.close());
    await call(keel, 'PUT', `/v1/agents/${a}`, {
      name: a,
      owner: { delivery: { channel: 'webhook', url: hook.url } },
      budgets: { dailyUsd: 0.001 },
    });
    for (const c of ['c1', 'c2', 'c3']) {
      expect((await keel.post(a, c, { text: 'hello' }, { wait: 30 })).body.status).toBe('budget_exhausted');
    }
    // The third stop has come and gone: a second notice would be here by now.
    expect(hook.received).toHaveLength(1);
    expect((hook.received[0]!.body as { text: string }).text).toMatch(
      new RegExp(`^Agent ${a}: a model call was not made because the daily budget of \\$0\\.001 is spent: `),
    );
  });

  it('refuses a negative or unknown budget with the API error shape', async () => {
    const a = uniqueId('a');
    const negative = await call<{ error: { code: string; message: string } }>(keel, 'PUT', `/v1/agents/${a}`, {
      name: a,
      budgets: { dailyUsd: -1 },
    });
    expect(negative.status).toBe(400);
    expect(negative.body.error.message).toBe('invalid body: /budgets/dailyUsd Too small: expected number to be >=0');
    const unknown = await call<{ error: { code: string; message: string } }>(keel, 'PUT', `/v1/agents/${a}`, {
      name: a,
      budgets: { weeklyUsd: 1 },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toMatch(/weeklyUsd/);
  });
});

describe('a delegate stopped by its tree budget', () => {
  it('waits, blocked by the budget; raised, it goes on, and its result is committed and relayed once', async () => {
    const a = uniqueId('a');
    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, budgets: { perDelegateTreeUsd: 0.001 } });
    const spawned = await keel.post(a, 'c1', { text: '/tool spawn_delegate {"text":"research"}' }, { wait: 30 });
    const delegateId = /spawned delegate (\S+)/.exec(spawned.body.reply?.text ?? '')?.[1];
    expect(delegateId).toBeTruthy();
    const view = () =>
      call<{ lifecycle: string; budgetBlocked?: string; outcome?: { kind: string }; relay?: string }>(
        keel,
        'GET',
        `/v1/agents/${a}/delegates/${delegateId}`,
      ).then((r) => r.body);
    const blocked = await eventually(
      async () => ((await view()).budgetBlocked ? view() : undefined),
      30_000,
      'blocked',
    );
    expect(blocked.budgetBlocked).toMatch(/^the per-delegate-tree budget of \$0\.001 is spent: \$0\.00 spent and /);
    expect(blocked.outcome).toBeUndefined();

    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, budgets: { perDelegateTreeUsd: 0.5 } });
    const relayed = await eventually(async () => ((await view()).relay ? view() : undefined), 60_000, 'the relay');
    expect(relayed).toMatchObject({ outcome: { kind: 'success' }, relay: 'relayed' });
    expect(relayed.budgetBlocked).toBeUndefined();
    // Counted at rest: the delegate has closed and the conversation has nothing open, so a second relay would show.
    await keel.client.workflow.getHandle(delegateWorkflowId(a, delegateId!)).result();
    await eventually(() => quiescent(keel.client, conversationWorkflowId(a, 'c1')), 30_000, 'the conversation at rest');
    const { messages } = (
      await call<{ messages: { role: string; text: string }[] }>(
        keel,
        'GET',
        `/v1/agents/${a}/conversations/c1?limit=1000`,
      )
    ).body;
    expect(messages.filter((m) => m.text === `delegate.finished ${delegateId} (success)`)).toHaveLength(1);
    const { rows } = await keel.pool.query<{ kind: string; root: string }>(
      `SELECT kind, root_conversation_key AS root FROM model_spend WHERE delegate_id = $1`,
      [delegateId],
    );
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.kind === 'delegate' && r.root === conversationWorkflowId(a, 'c1'))).toBe(true);
  });
});

describe('a job run stopped by a budget', () => {
  interface JobRun {
    runId: string;
    status: string;
    error?: string;
    budgetBlocked?: string;
  }
  const createJob = async (a: string, extra: Record<string, unknown> = {}) => {
    const created = await keel.api.inject({
      method: 'POST',
      url: `/v1/agents/${a}/jobs`,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({
        name: 'digest',
        schedule: { kind: 'every', intervalMs: 3_600_000 },
        task: 'digest',
        ...extra,
      }),
    });
    expect(created.statusCode).toBe(201);
    return created.json<{ id: string; budgetUsd: number | null }>();
  };
  const runNow = async (a: string, jobId: string) =>
    expect((await keel.api.inject({ method: 'POST', url: `/v1/agents/${a}/jobs/${jobId}/run` })).statusCode).toBe(202);
  const runsOf = async (a: string, jobId: string) =>
    (await call<JobRun[]>(keel, 'GET', `/v1/agents/${a}/jobs/${jobId}/runs`)).body;
  const blockedRun = (a: string, jobId: string) =>
    eventually(async () => (await runsOf(a, jobId)).find((r) => r.budgetBlocked), 60_000, 'a run blocked by a budget');

  it('waits, not counted toward failing the job; raised, the same run goes on and ends ok', async () => {
    const a = uniqueId('a');
    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, budgets: { perJobRunUsd: 0.001 } });
    const { id: jobId } = await createJob(a);
    await runNow(a, jobId);
    const blocked = await blockedRun(a, jobId);
    expect(blocked.status).toBe('running');
    expect(blocked.budgetBlocked).toMatch(
      /^budget: the per-job-run budget of \$0\.001 is spent: \$0\.00 spent and \$0\.00 reserved/,
    );
    const job = (
      await call<{ status: string; consecutiveErrors: number }>(keel, 'GET', `/v1/agents/${a}/jobs/${jobId}`)
    ).body;
    expect(job).toMatchObject({ status: 'active', consecutiveErrors: 0 });

    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, budgets: { perJobRunUsd: 0.5 } });
    const done = await eventually(
      async () => (await runsOf(a, jobId)).find((r) => r.status !== 'running'),
      60_000,
      'the run to end',
    );
    expect(done).toMatchObject({ runId: blocked.runId, status: 'ok' });
    expect(done.budgetBlocked).toBeUndefined();
    expect(await runsOf(a, jobId)).toHaveLength(1);
    const { rows } = await keel.pool.query<{ kind: string; job_id: string; job_run_id: string }>(
      'SELECT kind, job_id, job_run_id FROM model_spend WHERE agent_id = $1',
      [a],
    );
    expect(rows).toEqual([{ kind: 'job', job_id: jobId, job_run_id: blocked.runId }]);
  });

  it("a job's own budget replaces the agent's per-run one for its runs", async () => {
    const a = uniqueId('a');
    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, budgets: { perJobRunUsd: 0.5 } });
    const job = await createJob(a, { budgetUsd: 0.001 });
    expect(job.budgetUsd).toBe(0.001);
    await runNow(a, job.id);
    expect((await blockedRun(a, job.id)).budgetBlocked).toMatch(/^budget: the per-job-run budget of \$0\.001 is spent/);
    // Told that the agent's budgets changed, it asks again, and waits again: its own budget still holds it.
    const before = (await keel.pool.query('SELECT count(*) AS n FROM turns WHERE conversation_key LIKE $1', [`%${a}%`]))
      .rows[0] as { n: string };
    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, budgets: { perJobRunUsd: 0.6 } });
    await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ n: string }>(
          'SELECT count(*) AS n FROM turns WHERE conversation_key LIKE $1',
          [`%${a}%`],
        );
        return Number(rows[0]!.n) > Number(before.n);
      },
      60_000,
      'the run to ask again',
    );
    expect((await blockedRun(a, job.id)).budgetBlocked).toMatch(/^budget: the per-job-run budget of \$0\.001 is spent/);
    expect((await keel.pool.query('SELECT 1 FROM model_spend WHERE agent_id = $1', [a])).rowCount).toBe(0);
  });
});

describe("a routine's ai.* call stopped by a budget", () => {
  it('throws an error the tool catches, naming the budget; the run ends ok with what the tool made of it', async () => {
    const a = uniqueId('a');
    const r = routineApi(() => keel);
    await r.app(a, 'crm', []);
    const careful = {
      name: 'carefulDraft',
      code: `async function carefulDraft() {
        try { return await ai.write('a note'); } catch (e) { return 'caught: ' + e.message; }
      }`,
    };
    // The first run authors the tool (within no budget); the next one reuses it, under its own budget of $0.001.
    await r.routine(a, 'crm', 'draft', { prompt: `Draft ${author(careful)}` });
    expect(await r.runNow(a, 'crm', 'draft')).toMatchObject({ status: 'ok', digest: 'draft: a note' });
    // The routine's own budget replaces the agent's generous per-run one. The owner hears of the stop.
    const hook = await startWebhookReceiver();
    cleanups.push(() => hook.close());
    const owner = { delivery: { channel: 'webhook', url: hook.url } };
    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, owner, budgets: { perRoutineRunUsd: 0.5 } });
    const put = await r.routine(a, 'crm', 'draft', { prompt: 'Run carefulDraft', budgetUsd: 0.001 });
    expect(put.body.budgetUsd).toBe(0.001);
    const stopped = await r.runNow(a, 'crm', 'draft');
    expect(stopped).toMatchObject({ status: 'ok', tool: { name: 'carefulDraft', authored: false } });
    expect(stopped.digest).toMatch(/^caught: ai\.write: the per-routine-run budget of \$0\.001 is spent: /);
    expect(stopped.digest).toMatch(/: \$0\.00 spent and \$0\.00 reserved, and this call could cost up to \$0\.01\d+$/);
    const { rows } = await keel.pool.query<{ kind: string; routine_run_id: string }>(
      `SELECT kind, routine_run_id FROM model_spend WHERE agent_id = $1 ORDER BY created_at`,
      [a],
    );
    // The first run's authoring and ai.write were charged to it; the stopped call left no row.
    expect(rows.map((x) => x.kind)).toEqual(['authoring', 'routine']);
    expect(rows.every((x) => x.routine_run_id !== stopped.runId)).toBe(true);
    // Told once, by the step whose call was stopped (the run has ended: a second notice would be here by now).
    expect(hook.received.map((w) => (w.body as { text: string }).text)).toEqual([
      expect.stringMatching(
        new RegExp(`^Agent ${a}: a model call was not made because the per-routine-run budget of \\$0\\.001 is spent`),
      ),
    ]);
  });
});

describe('concurrent calls cannot overspend', () => {
  it('20 conversations racing for a budget that allows 5 calls: exactly 5 calls, the rest stopped', async () => {
    const a = uniqueId('a');
    // The worst case of one such call, from a first conversation with no budget.
    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a });
    await keel.post(a, 'probe', { text: '/delay 10 race' }, { wait: 30 });
    const worst = (await ledger(keel, a)).reservedUsd;
    const spentBefore = (await ledger(keel, a)).costUsd;
    const limit = spentBefore + 5.5 * worst;
    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, budgets: { dailyUsd: limit } });

    // Each call streams for 5 s, so every reservation is made while the first five still hold theirs.
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        keel.post(a, `race${String(i).padStart(2, '0')}`, { text: '/delay 5000 race' }, { wait: 60 }),
      ),
    );
    const statuses = answers.map((r) => r.body.status).sort();
    expect(statuses.filter((s) => s === 'replied')).toHaveLength(5);
    expect(statuses.filter((s) => s === 'budget_exhausted')).toHaveLength(15);
    const after = await ledger(keel, a);
    expect(after.calls).toBe(1 + 5);
    expect(after.heldUsd).toBe(0);
    expect(after.costUsd).toBeLessThanOrEqual(limit);
  }, 120_000);
});

describe('reservations at the same instant', () => {
  it('20 reservations racing on 20 connections for a budget that allows 5: exactly 5 placed', async () => {
    const a = uniqueId('a');
    await call(keel, 'PUT', `/v1/agents/${a}`, { name: a, budgets: { dailyUsd: 0.55 } });
    const pool = new Pool({ connectionString: inject('databaseUrl'), max: 20 });
    cleanups.push(() => pool.end());
    // Every connection open first, so that the 20 transactions really overlap.
    await Promise.all(Array.from({ length: 20 }, () => pool.query('SELECT 1')));
    const budgets = budgetsFor({ agentId: a, kind: 'turn' }, { dailyUsd: 0.55 }, new Date());
    const overruns = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        reserve(pool, {
          callKey: `${a}/race/${i}`,
          payer: { agentId: a, kind: 'turn' },
          model: 'scripted',
          worstUsd: 0.1,
          budgets,
        }),
      ),
    );
    expect(overruns.filter((o) => o === undefined)).toHaveLength(5);
    expect(overruns.find((o) => o !== undefined)).toMatchObject({ name: 'dailyUsd', limitUsd: 0.55, neededUsd: 0.1 });
    const after = await ledger(keel, a);
    expect(after.heldUsd).toBeCloseTo(0.5, 10);
  });
});

describe('a crash mid-call leaks no reservation', () => {
  it('kill -9 of the worker during a call: the retry takes its place under the same key, settled once', async () => {
    const k = await startTestKeel({ worker: false });
    cleanups.push(() => k.stop());
    const a = uniqueId('a');
    const key = conversationWorkflowId(a, 'c1');
    let worker: ChildProcess = startWorkerProcess(k, inject('databaseUrl'));
    cleanups.push(() => stopProcess(worker));
    // Calibrate: one call's worst case, then a budget that holds one such call and not two.
    await call(k, 'PUT', `/v1/agents/${a}`, { name: a });
    await k.post(a, 'probe', { text: '/delay 10 crash' }, { wait: 60 });
    const probe = await ledger(k, a);
    await call(k, 'PUT', `/v1/agents/${a}`, {
      name: a,
      budgets: { dailyUsd: probe.costUsd + 1.5 * probe.reservedUsd },
    });

    const posted = await k.post(a, 'c1', { text: '/delay 6000 crash' });
    expect(posted.status).toBe(202);
    await streamingText(k.pool, key, 60_000);
    const held = await ledger(k, a);
    expect(held.heldUsd).toBeGreaterThan(0);
    worker.kill('SIGKILL');
    worker = startWorkerProcess(k, inject('databaseUrl'));

    const turnId = posted.body.turnId;
    await eventually(
      async () => {
        const { rows } = await k.pool.query<{ status: string }>('SELECT status FROM turns WHERE turn_id = $1', [
          turnId,
        ]);
        return rows[0]?.status === 'replied';
      },
      90_000,
      'the turn to be replied after the crash',
    );
    const { rows } = await k.pool.query<{ settled_attempts: number[]; held_usd: string }>(
      'SELECT settled_attempts, held_usd FROM model_spend WHERE turn_id = $1',
      [turnId],
    );
    // One row for the call: the killed attempt's hold was replaced by its retry's, which settled. The call is a local
    // step of its turn: the workflow task lost with the killed worker runs it again, from its first attempt.
    expect(rows).toHaveLength(1);
    expect(rows[0]!.settled_attempts).toEqual([1]);
    expect(Number(rows[0]!.held_usd)).toBe(0);
    const end = await ledger(k, a);
    expect(end.calls).toBe(2);
    expect(end.heldUsd).toBe(0);
  }, 180_000);
});
