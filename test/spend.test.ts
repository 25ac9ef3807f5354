import type { ChildProcess } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { Pool } from 'pg';
import { reserve } from '../db/spend';
import { conversationWorkflowId } from '../domain/ids';
import { budgetsFor } from '../domain/spend';
import { stopProcess } from '../scripts/processes';
import { eventually, startTestKeel, streamedChars, uniqueId, type TestKeel } from './support/keel';
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
    // Every call that answered is in model_calls too, with the same tokens.
    const { rows } = await keel.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM model_calls WHERE conversation_key = $1 AND stop_reason IS NOT NULL`,
      [conversationWorkflowId(a, 'c1')],
    );
    expect(Number(rows[0]!.n)).toBe(4);
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
    await eventually(async () => (await streamedChars(k, key)) > 0, 60_000, 'the model call to be streaming');
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
    // One row for the call: the killed attempt's hold was replaced by its retry's, which settled.
    expect(rows).toHaveLength(1);
    expect(rows[0]!.settled_attempts).toEqual([2]);
    expect(Number(rows[0]!.held_usd)).toBe(0);
    const end = await ledger(k, a);
    expect(end.calls).toBe(2);
    expect(end.heldUsd).toBe(0);
  }, 180_000);
});
