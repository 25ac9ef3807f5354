/**
 * What one unit of work costs Temporal (billable actions, from the histories) and PostgreSQL (writes, from
 * pg_stat_database around the batch): a turn, a delegate run, a routine run. A job run's costs come from the burst.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import type { KeelStack } from '../scripts/keel-stack';
import {
  actionsMatching,
  actionsPer,
  addActions,
  billableActions,
  pgPer,
  pgWritesOf,
  type ActionCounts,
  type PgCounters,
} from './actions';
import { eventsOf, pool, sleep, submit, text } from './drive';
import { runsMatching } from './measure';

/** Visibility is updated a moment after a history: the bench reads it once that moment has passed. */
const VISIBILITY_LAG_MS = 2_000;

/** `conversations` conversations of `turnsEach` sequential turns, all at once. */
async function turnCosts(
  stack: KeelStack,
  client: Client,
  db: pg.Pool,
  noise: PgCounters,
  conversations: number,
  turnsEach: number,
) {
  const agent = `bench-cost-${randomUUID().slice(0, 8)}`;
  const { writes } = await pgWritesOf(db, noise, () =>
    pool(conversations, conversations, async (c) => {
      for (let i = 1; i <= turnsEach; i++) {
        const r = await submit(stack, `c${c}`, { text: text(i), messageId: `c${c}-${i}` }, 60, agent);
        if (r.status !== 'replied') throw new Error(`cost turn ${c}/${i}: ${r.status}`);
      }
    }),
  );
  await sleep(VISIBILITY_LAG_MS);
  const { actions } = await actionsMatching(client, `KeelKind = "conversation" AND KeelAgentId = "${agent}"`);
  const turns = conversations * turnsEach;
  return {
    conversations,
    turnsEach,
    actionsPerTurn: actionsPer(actions, turns),
    pgWritesPerTurn: pgPer(writes, turns),
  };
}

/** Each of `count` conversations spawns a delegate (scripted: done at once) and relays its result in a second turn. */
async function delegateCosts(stack: KeelStack, client: Client, db: pg.Pool, noise: PgCounters, count: number) {
  const agent = `bench-delegate-${randomUUID().slice(0, 8)}`;
  const spawn = { text: '/tool spawn_delegate {"text":"quick job","historyMode":"clean"}' };
  const { writes } = await pgWritesOf(db, noise, () =>
    pool(count, count, async (c) => {
      const events = await eventsOf(stack, `d${c}`, agent);
      try {
        const r = await submit(stack, `d${c}`, { ...spawn, messageId: `d${c}` }, 60, agent);
        if (!/spawned/.test(r.reply?.text ?? '')) throw new Error(`no delegate spawned: ${JSON.stringify(r)}`);
        // The spawning turn, then the turn that relays the delegate's result.
        await events.awaitFinishedCount(2, 120_000);
      } finally {
        events.close();
      }
    }),
  );
  await sleep(VISIBILITY_LAG_MS);
  const delegates = await actionsMatching(client, `KeelKind = "delegate" AND KeelAgentId = "${agent}"`);
  const conversations = await actionsMatching(client, `KeelKind = "conversation" AND KeelAgentId = "${agent}"`);
  return {
    delegates: count,
    actionsPerDelegate: actionsPer(delegates.actions, count),
    // With the conversation's part: its start, the spawning turn and the relay turn.
    actionsWithTurns: actionsPer(addActions({ ...delegates.actions }, conversations.actions), count),
    pgWritesWithTurns: pgPer(writes, count),
  };
}

/** A routine whose saved tool reads a record: one run authors the tool, then `count` runs reuse it one at a time. */
async function routineCosts(stack: KeelStack, client: Client, db: pg.Pool, noise: PgCounters, count: number) {
  const agent = `bench-routine-${randomUUID().slice(0, 8)}`;
  const base = `${stack.api}/v1/agents/${agent}/apps/crm`;
  const call = async <T>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }> => {
    const res = await fetch(url, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    const json = (await res.json()) as T;
    if (res.status >= 400 && res.status !== 409)
      throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`);
    return { status: res.status, body: json };
  };
  await call('PUT', base, { name: 'CRM', tables: [{ name: 'leads', columns: ['name'] }] });
  await call('POST', `${base}/tables/leads/records`, { id: 'l1', name: 'Ada' });
  const tool = {
    name: 'lookUpAda',
    inputs: ['input'],
    code: "async function lookUpAda() { const ada = await data.get('leads', 'l1'); return 'found ' + ada.name; }",
  };
  await call('PUT', `${base}/routines/look`, {
    label: 'Look up',
    schedule: { expr: 'daily' },
    prompt: `Look up Ada /author ${JSON.stringify(tool)}`,
  });
  type Run = { runId: string; status: string };
  const runs = async () => (await call<Run[]>('GET', `${base}/routines/look/runs`)).body;
  /** Run now, then wait for that run to end; answers its run id. */
  const runOnce = async (): Promise<string> => {
    const seen = new Set((await runs()).map((r) => r.runId));
    while ((await call('POST', `${base}/routines/look/run`)).status === 409) await sleep(200);
    for (const deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(200)) {
      const run = (await runs()).find((r) => !seen.has(r.runId) && r.status !== 'running');
      if (run?.status === 'ok') return run.runId;
      if (run) throw new Error(`routine run ${run.runId}: ${run.status}`);
    }
    throw new Error('a routine run did not end within 120 s');
  };
  await runOnce(); // authors and saves the tool
  const measured = new Set<string>();
  const { writes } = await pgWritesOf(db, noise, async () => {
    for (let i = 0; i < count; i++) measured.add(await runOnce());
  });
  await sleep(VISIBILITY_LAG_MS);
  const actions: ActionCounts = {};
  for await (const r of runsMatching(client, `KeelKind = "routine" AND KeelAgentId = "${agent}"`))
    if (measured.has(r.runId)) addActions(actions, billableActions(r.events));
  return { runs: count, actionsPerRun: actionsPer(actions, count), pgWritesPerRun: pgPer(writes, count) };
}

export interface CostOptions {
  conversations: number;
  turnsEach: number;
  delegates: number;
  routineRuns: number;
}

/** Each part on its own: a failed part is reported as such and the others still count. */
export async function costsRun(stack: KeelStack, client: Client, db: pg.Pool, noise: PgCounters, o: CostOptions) {
  const part = async <T>(name: string, f: () => Promise<T>): Promise<T | { error: string }> => {
    try {
      return await f();
    } catch (err) {
      console.error(`bench: costs of ${name} failed:`, err);
      return { error: err instanceof Error ? err.message : String(err) };
    }
  };
  return {
    pgNoisePerSecond: noise,
    turn: await part('turns', () => turnCosts(stack, client, db, noise, o.conversations, o.turnsEach)),
    delegate: await part('delegates', () => delegateCosts(stack, client, db, noise, o.delegates)),
    routine: await part('routines', () => routineCosts(stack, client, db, noise, o.routineRuns)),
  };
}
