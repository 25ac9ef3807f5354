import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { stopProcess } from '../scripts/processes';
import { endedEval, type Evaluation } from './support/evals';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startWorkerProcess, waitForPollers } from './support/workers';

/**
 * An evaluation outlives its worker (issue 30): killed with SIGKILL while a live-model turn's model call is out, the
 * evaluation is finished by another worker, each turn run and kept once and each model call paid for once.
 */
let keel: TestKeel;
const workers: ChildProcess[] = [];
beforeAll(async () => {
  keel = await startTestKeel({ worker: false });
});
afterAll(async () => {
  for (const w of workers) if (w.exitCode === null && w.signalCode === null) await stopProcess(w);
  await keel?.stop();
});

describe('an evaluation, its worker killed while a model call is out', () => {
  it('is finished by another worker with each turn kept once and each call paid for once', async () => {
    const agent = uniqueId('eval-crash');
    const first = startWorkerProcess(keel, inject('databaseUrl'));
    workers.push(first);
    await waitForPollers(keel, [first]);
    expect((await keel.call('PUT', `/v1/agents/${agent}`, { name: agent })).status).toBe(200);
    const started = await keel.call<Evaluation>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'live-model',
      written: [
        {
          name: 'slow',
          messages: ['/delay 4000 slow one', 'second'],
          expect: [
            { replyContains: 'echo: slow one', turn: 1 },
            { replyContains: 'echo: second', turn: 2 },
          ],
        },
      ],
    });
    expect(started.status, started.raw).toBe(202);
    // The first turn's model call is out: its spend is held, nothing is settled yet.
    const spend = () =>
      keel.pool.query<{ key: string; settled: number[]; held: string }>(
        `SELECT call_key AS key, settled_attempts AS settled, held_usd AS held FROM model_spend
          WHERE agent_id = $1 AND kind = 'eval' ORDER BY call_key`,
        [agent],
      );
    await eventually(async () => (await spend()).rows.some((r) => Number(r.held) > 0), 30_000, 'the call out');
    first.kill('SIGKILL');
    const second = startWorkerProcess(keel, inject('databaseUrl'));
    workers.push(second);

    const done = await endedEval(keel, agent, started.body.id, 90_000);
    expect(done.status).toBe('finished');
    expect(done.cases[0]).toMatchObject({ caseId: 'slow', status: 'passed', result: { reasons: [], modelCalls: 2 } });
    const { rows: turns } = await keel.pool.query<{ turn: number }>(
      'SELECT turn_index AS turn FROM eval_turns WHERE eval_id = $1 ORDER BY 1',
      [started.body.id],
    );
    expect(turns.map((t) => t.turn)).toEqual([1, 2]);
    // One spend row per model call, each settled by one attempt, none still held.
    const settled = (await spend()).rows;
    expect(settled.map((r) => [r.settled.length, Number(r.held)])).toEqual([
      [1, 0],
      [1, 0],
    ]);
  }, 150_000);
});
