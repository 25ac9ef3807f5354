import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId, reflectionWorkflowId } from '../domain/ids';
import { startDevServer, type DevServer } from '../scripts/dev-server';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { freePort } from '../scripts/ports';
import { reflectionApi } from './support/reflection';

// A dev server of its own that suggests continue-as-new after 30 events, so a handful of turns cross runs (a turn
// whose model step sends its reply records few events).
let server: DevServer;
let keel: TestKeel;

beforeAll(async () => {
  server = await startDevServer({
    port: await freePort(),
    stdio: 'ignore',
    extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=30'],
  });
  // Idle conversations close after 5 s here, so that a run begun by continue-as-new is seen to close too.
  keel = await startTestKeel({ temporalAddress: server.address, conversationIdleMs: 5_000 });
});
afterAll(async () => {
  await keel?.stop();
  await server?.stop();
});

async function runsOf(workflowId: string): Promise<string[]> {
  const runs: string[] = [];
  for await (const w of keel.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.push(w.runId);
  return runs;
}

describe('continue-as-new', () => {
  it('carries the queue across runs: messages accepted before and after are all answered once, in order', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    const posts = [];
    for (let i = 0; i < 12; i++) posts.push(await keel.post(a, c, { text: `m${i}`, messageId: `id-${i}` }));
    // And a burst of concurrent messages while runs hand over to each other.
    const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => keel.post(a, c, { text: `b${i}` })));
    expect(burst.every((p) => p.status === 202)).toBe(true);
    expect(posts.every((p) => p.status === 202)).toBe(true);
    await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ n: string }>(
          `SELECT count(*) AS n FROM turns WHERE conversation_key = $1 AND status = 'replied'`,
          [key],
        );
        return Number(rows[0]!.n) === 22;
      },
      60_000,
      '22 replies',
    );
    expect((await runsOf(key)).length).toBeGreaterThan(1);
    const { rows } = await keel.pool.query<{ role: string; text: string }>(
      `SELECT role, text FROM messages WHERE conversation_key = $1 AND role IN ('user', 'assistant') ORDER BY seq`,
      [key],
    );
    const texts = rows.map((r) => r.text);
    // Each message is followed by its own reply, once.
    for (let i = 0; i < texts.length; i += 2) expect(texts[i + 1]).toBe(`echo: ${texts[i]}`);
    expect(texts.filter((_, i) => i % 2 === 0).slice(0, 12)).toEqual(Array.from({ length: 12 }, (_, i) => `m${i}`));
    expect(
      texts
        .filter((_, i) => i % 2 === 0)
        .slice(12)
        .sort(),
    ).toEqual(Array.from({ length: 10 }, (_, i) => `b${i}`));
    // The conversation's idle time crossed the runs with the queue: its last run closes, idle.
    await eventually(
      async () => (await keel.client.workflow.getHandle(key).describe()).status.name === 'COMPLETED',
      30_000,
      'the last run to close idle',
    );
  });

  it('admits and relays, once each, the results of two delegates that finish after the continue-as-new', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    const ids: string[] = [];
    for (const ms of [6000, 7000]) {
      const res = await keel.post(
        a,
        c,
        { text: `/tool spawn_delegate {"text":"/delay ${ms} job ${ms}","historyMode":"clean"}` },
        { wait: 30 },
      );
      ids.push(/spawned delegate (\S+)/.exec(res.body.reply?.text ?? '')![1]!);
    }
    const runsBefore = (await runsOf(key)).length;
    // Enough turns for at least one continue-as-new while both delegates still run.
    for (let i = 0; i < 5; i++) await keel.post(a, c, { text: `filler ${i}` }, { wait: 30 });
    const { rows: running } = await keel.pool.query(
      'SELECT 1 FROM delegates WHERE conversation_key = $1 AND completed_at IS NULL',
      [key],
    );
    expect(running).toHaveLength(2);
    expect((await runsOf(key)).length).toBeGreaterThan(runsBefore);

    const relays = async () => {
      const { rows } = await keel.pool.query<{ text: string }>(
        `SELECT text FROM messages WHERE conversation_key = $1 AND role = 'assistant' AND text LIKE 'relay: %'`,
        [key],
      );
      return rows.map((r) => r.text).join(' | ');
    };
    await eventually(
      async () => {
        const text = await relays();
        return ids.every((id) => text.includes(id)) ? text : undefined;
      },
      60_000,
      'both relayed',
    );
    const text = await relays();
    for (const id of ids) expect(text.split(id).length - 1).toBe(1);
    const { rows } = await keel.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM delegate_admissions WHERE decision = 'admitted' AND delegate_id = ANY($1)`,
      [ids],
    );
    expect(Number(rows[0]!.n)).toBe(2);
  });

  it('keeps messageId idempotency across runs', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    const first = await keel.post(a, c, { text: 'first', messageId: 'first' }, { wait: 30 });
    for (let i = 0; i < 6; i++) await keel.post(a, c, { text: `filler ${i}` }, { wait: 30 });
    expect((await runsOf(key)).length).toBeGreaterThan(1);
    const again = await keel.post(a, c, { text: 'first', messageId: 'first' }, { wait: 30 });
    expect(again.body.turnId).toBe(first.body.turnId);
    expect(again.body.reply?.text).toBe('echo: first');
    const { rows } = await keel.pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM turns WHERE conversation_key = $1',
      [key],
    );
    expect(Number(rows[0]!.n)).toBe(7);
  });

  it("keeps reflection's queue: summaries of 20 conversations queued across runs, none lost", async () => {
    // Reflection that never drains on count, so that its queue grows while the workflow continues as new.
    const patient = await startTestKeel({ temporalAddress: server.address, reflection: { drainAtQueued: 1_000 } });
    try {
      const r = reflectionApi(() => patient);
      const a = uniqueId('a');
      await r.agent(a);
      for (let i = 0; i < 20; i++) await r.say(a, `c${i}`, `hello ${i}`);
      const state = await eventually(
        async () => {
          const s = await r.state(a);
          return s.queued.length === 20 ? s : undefined;
        },
        60_000,
        '20 queued summaries',
      );
      expect(state.queued.map((q) => q.conversationId).sort()).toEqual(
        Array.from({ length: 20 }, (_, i) => `c${i}`).sort(),
      );
      expect((await runsOf(reflectionWorkflowId(a))).length).toBeGreaterThan(1);
    } finally {
      await patient.stop();
    }
  });
});
