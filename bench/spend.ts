/**
 * `npm run bench -- --spend`: what spend control adds to a turn, side by side in one run on one stack. Turn latency
 * is measured through the API, alternating between an agent with budgets and one without. On the same PostgreSQL,
 * the ledger's own steps are then timed one by one: a reservation against the three budgets the agent has, the
 * settling of it, and a place in a shared rate-limit bucket. Each is set against the turn p50. The scripted model
 * makes one model call per turn here, so one reserve and one settle per turn. Writes bench/SPEND.md and
 * bench/spend-results.json (BENCH_OUT elsewhere for a try).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { inTransaction, createPool } from '../db/pool';
import { takeTurn } from '../db/rate-limits';
import { reserve, settle } from '../db/spend';
import { budgetsFor, costOf, estimatedInputTokens, MODEL_PRICES, worstCaseUsd, type Budgets } from '../domain/spend';
import { startKeelStack } from '../scripts/keel-stack';
import { REPO_ROOT } from '../scripts/processes';
import { bundleWorkflows } from '../worker/bundle';
import { submit } from './drive';
import { percentile, round } from './measure';

const TURNS = Number(process.env.BENCH_SPEND_TURNS ?? 200);
const STEPS = Number(process.env.BENCH_SPEND_STEPS ?? 500);
/** Calls already in the agent's ledger today for the second reservation measurement: a busy agent's day. */
const BUSY_DAY_CALLS = Number(process.env.BENCH_SPEND_BUSY_CALLS ?? 50_000);
const OUT = process.env.BENCH_OUT ?? path.join(REPO_ROOT, 'bench');
const GOAL_PERCENT = 5;
const BUDGETS: Budgets = { dailyUsd: 1_000, monthlyUsd: 10_000, perTurnUsd: 10 };

interface Figures {
  turns: number;
  turnP50Ms: { budgets: number; none: number };
  turnP95Ms: { budgets: number; none: number };
  steps: number;
  reserveP50Ms: number;
  /** The same reservation once the agent's ledger holds BUSY_DAY_CALLS calls of today. */
  busyDayCalls: number;
  reserveBusyP50Ms: number;
  settleP50Ms: number;
  rateTurnP50Ms: number;
  /** (reserve + settle) p50 per turn, as a share of the turn p50 with budgets. */
  overheadPercent: number;
  withRateLimitPercent: number;
}

/** Times `count` runs of `step`, one after another, in ms. */
async function timed(count: number, step: (i: number) => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await step(i);
    out.push(performance.now() - t0);
  }
  return out;
}

async function measure(): Promise<Figures> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'keel-bench-bundle-'));
  const bundlePath = path.join(dir, 'workflows.js');
  await writeFile(bundlePath, await bundleWorkflows());
  const stack = await startKeelStack({
    logFile: path.join(os.tmpdir(), 'keel-bench-spend.log'),
    env: { KEEL_WORKFLOW_BUNDLE: bundlePath },
  });
  const db = createPool(stack.databaseUrl);
  try {
    const run = randomUUID().slice(0, 8);
    const [metered, free] = [`spend-${run}`, `free-${run}`];
    for (const [agent, budgets] of [
      [metered, BUDGETS],
      [free, {}],
    ] as const) {
      const res = await fetch(`${stack.api}/v1/agents/${agent}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: agent, budgets }),
      });
      if (!res.ok) throw new Error(`PUT agent ${agent}: ${res.status} ${await res.text()}`);
    }
    const latencies: Record<'budgets' | 'none', number[]> = { budgets: [], none: [] };
    // A warm-up turn each, then turns alternating between the two agents, so that both meet the same machine.
    for (const agent of [metered, free]) await submit(stack, 'warm', { text: 'warm up' }, 60, agent);
    for (let i = 1; i <= TURNS; i++) {
      for (const [agent, into] of [
        [metered, latencies.budgets],
        [free, latencies.none],
      ] as const) {
        const t0 = performance.now();
        const r = await submit(stack, 'c1', { text: `turn ${i}`, messageId: `${agent}-${i}` }, 60, agent);
        if (r.status !== 'replied') throw new Error(`turn ${i} of ${agent} ended ${r.status}`);
        into.push(performance.now() - t0);
      }
    }

    // The ledger's steps alone, as the model activity runs them for a turn of the metered agent.
    const payer = { agentId: metered, kind: 'turn' as const, conversationKey: `bench:${metered}` };
    const request = {
      system: 'You are a helpful agent.'.repeat(40),
      messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'hello '.repeat(100) }] }],
      tools: [],
      maxTokens: 4096,
    };
    const inputTokens = estimatedInputTokens(request);
    const worstUsd = worstCaseUsd({ inputTokens, maxTokens: request.maxTokens }, MODEL_PRICES.scripted!);
    const usage = { inputTokens: 400, outputTokens: 50, cacheReadTokens: 0, cacheWriteTokens: 0 };
    const key = (i: number) => `bench:${run}:call:${i}`;
    const reserveMs = await timed(STEPS, async (i) => {
      const budgets = budgetsFor({ ...payer, turnId: `t${i}` }, BUDGETS, new Date());
      const overrun = await reserve(db, { callKey: key(i), payer, model: 'scripted', worstUsd, budgets });
      if (overrun) throw new Error(`bench: a reservation was refused: ${JSON.stringify(overrun)}`);
    });
    const settleMs = await timed(STEPS, (i) =>
      inTransaction(db, (tx) =>
        settle(tx, {
          callKey: key(i),
          attempt: 1,
          model: 'scripted',
          usage,
          costUsd: costOf(usage, MODEL_PRICES.scripted!),
        }),
      ),
    );
    const limit = { requestsPerMinute: 1_000_000, inputTokensPerMinute: 100_000_000 };
    const cost = { requests: 1, inputTokens: 400, outputTokens: 4096 };
    const bucket = `bench/${run}`;
    const rateMs = await timed(STEPS, (i) => takeTurn(db, { callKey: key(i), bucket, limit, cost }));

    // A busy agent's day: the daily and monthly budgets count every call of the period.
    await db.query(
      `INSERT INTO model_spend (call_key, agent_id, kind, model, turn_id, cost_usd, settled_attempts)
       SELECT 'bench:busy:' || $2 || ':' || g, $1, 'turn', 'scripted', 'busy' || g, 0.0001, '{1}'
         FROM generate_series(1, $3) g`,
      [metered, run, BUSY_DAY_CALLS],
    );
    // What settling those calls would have added to the agent's day and month.
    await db.query(`UPDATE spend_totals SET spent_usd = spent_usd + $2 * 0.0001 WHERE agent_id = $1`, [
      metered,
      BUSY_DAY_CALLS,
    ]);
    await db.query('ANALYZE model_spend');
    const busyMs = await timed(STEPS, async (i) => {
      const budgets = budgetsFor({ ...payer, turnId: `b${i}` }, BUDGETS, new Date());
      await reserve(db, { callKey: `${key(i)}:busy`, payer, model: 'scripted', worstUsd, budgets });
    });

    const p50 = (xs: number[]) => round(percentile(xs, 50), 2);
    const turnP50 = p50(latencies.budgets);
    const [reserveP50, settleP50, rateP50] = [p50(reserveMs), p50(settleMs), p50(rateMs)];
    return {
      turns: TURNS,
      turnP50Ms: { budgets: turnP50, none: p50(latencies.none) },
      turnP95Ms: {
        budgets: round(percentile(latencies.budgets, 95), 1),
        none: round(percentile(latencies.none, 95), 1),
      },
      steps: STEPS,
      reserveP50Ms: reserveP50,
      busyDayCalls: BUSY_DAY_CALLS,
      reserveBusyP50Ms: p50(busyMs),
      settleP50Ms: settleP50,
      rateTurnP50Ms: rateP50,
      overheadPercent: round(((reserveP50 + settleP50) / turnP50) * 100, 2),
      withRateLimitPercent: round(((reserveP50 + settleP50 + rateP50) / turnP50) * 100, 2),
    };
  } finally {
    await db.end();
    await stack.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

function report(f: Figures, startedAt: Date, minutes: number): string {
  const met = f.overheadPercent <= GOAL_PERCENT;
  return [
    '# What spend control adds to a turn',
    '',
    `Run ${startedAt.toISOString()} by \`npm run bench -- --spend\` (${round(minutes, 1)} minutes), on ` +
      `${os.cpus().length} × ${os.cpus()[0]?.model.split(' ').slice(0, 2).join(' ')}, Node ${process.version}: ` +
      'the dev-server stack (`scripts/keel-stack.ts`), the scripted model at zero delay, one model call per turn.',
    '',
    `**Goal: reserving and settling cost at most ${GOAL_PERCENT}% of turn p50: ${met ? 'met' : 'missed'}** ` +
      `(${f.overheadPercent}%: ${f.reserveP50Ms} ms + ${f.settleP50Ms} ms against a ${f.turnP50Ms.budgets} ms turn).`,
    '',
    `| ${f.turns} sequential turns, alternating | turn p50 ms | turn p95 ms |`,
    '| --- | ---: | ---: |',
    `| agent with daily, monthly and per-turn budgets | ${f.turnP50Ms.budgets} | ${f.turnP95Ms.budgets} |`,
    `| agent with no budgets (still reserved and settled, against none) | ${f.turnP50Ms.none} | ${f.turnP95Ms.none} |`,
    '',
    `| the ledger's step, ${f.steps} times on the same PostgreSQL | p50 ms | share of turn p50 |`,
    '| --- | ---: | ---: |',
    `| reserve: the agent's spend lock, three budgets counted, the hold written | ${f.reserveP50Ms} | ` +
      `${round((f.reserveP50Ms / f.turnP50Ms.budgets) * 100, 2)}% |`,
    `| reserve, with ${f.busyDayCalls.toLocaleString('en')} calls already in today's ledger | ` +
      `${f.reserveBusyP50Ms} | ${round((f.reserveBusyP50Ms / f.turnP50Ms.budgets) * 100, 2)}% |`,
    `| settle: the hold turned into the cost (its own transaction here; a turn's rides on the transcript's) | ` +
      `${f.settleP50Ms} | ${round((f.settleP50Ms / f.turnP50Ms.budgets) * 100, 2)}% |`,
    `| a place in a shared rate-limit bucket (only with KEEL_RATE_LIMITS) | ${f.rateTurnP50Ms} | ` +
      `${round((f.rateTurnP50Ms / f.turnP50Ms.budgets) * 100, 2)}% |`,
    `| **reserve + settle** | **${round(f.reserveP50Ms + f.settleP50Ms, 2)}** | **${f.overheadPercent}%** |`,
    `| reserve + settle + rate limit | ${round(f.reserveP50Ms + f.settleP50Ms + f.rateTurnP50Ms, 2)} | ` +
      `${f.withRateLimitPercent}% |`,
    '',
    'The daily and monthly budgets are counted over the ledger rows of their period (index `model_spend_by_agent`),',
    "the per-turn one over the turn's rows (`model_spend_by_turn`); the busy-day row shows what a long day costs.",
    '',
  ].join('\n');
}

export async function spendBench(): Promise<void> {
  const startedAt = new Date();
  await mkdir(OUT, { recursive: true });
  const figures = await measure();
  const minutes = (Date.now() - startedAt.getTime()) / 60_000;
  console.log(`bench: ${JSON.stringify(figures)}`);
  await writeFile(path.join(OUT, 'spend-results.json'), `${JSON.stringify({ startedAt, figures }, null, 2)}\n`);
  await writeFile(path.join(OUT, 'SPEND.md'), report(figures, startedAt, minutes));
  console.log(`bench: wrote ${path.join(OUT, 'SPEND.md')}`);
}
