import type { ChildProcess } from 'node:child_process';
import { Pool } from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { takeTurn } from '../db/rate-limits';
import { conversationWorkflowId } from '../domain/ids';
import { stopProcess } from '../scripts/processes';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { identityOf, localStepsOf, startWorkerProcess, waitForPollers } from './support/workers';

/**
 * Provider rate limits shared by every worker: an API and two worker processes calling a local Messages API with
 * KEEL_RATE_LIMITS set. Each test has a model name of its own, so its bucket is its own.
 */
let fake: FakeAnthropic;
let keel: TestKeel;
let workers: ChildProcess[] = [];
const model = uniqueId('claude-limited');

beforeAll(async () => {
  fake = await startFakeAnthropic();
  keel = await startTestKeel({ worker: false });
  const env = {
    KEEL_MODEL: 'anthropic',
    ANTHROPIC_API_KEY: 'sk-test-not-real',
    ANTHROPIC_BASE_URL: fake.url,
    KEEL_ANTHROPIC_MODEL: model,
    // One request a second, and a bucket of one second's worth: a burst goes one by one.
    KEEL_RATE_LIMITS: JSON.stringify({ anthropic: { [model]: { requestsPerMinute: 60, burstSeconds: 1 } } }),
  };
  workers = [
    startWorkerProcess(keel, inject('databaseUrl'), env),
    startWorkerProcess(keel, inject('databaseUrl'), env),
  ];
  await waitForPollers(keel, workers);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => stopProcess(w)));
  await keel?.stop();
  await fake?.close();
});

/** The requests the Messages API received for conversations of this agent, in the order they arrived. */
function requestsOf(agentId: string) {
  return fake.requests.filter((r) => JSON.stringify(r.body).includes(agentId));
}

describe('places taken at the same instant', () => {
  it('20 calls racing on 20 connections for one a second: one goes, the rest queue a second apart', async () => {
    const pool = new Pool({ connectionString: inject('databaseUrl'), max: 20 });
    try {
      // Every connection open first, so that the 20 transactions really overlap.
      await Promise.all(Array.from({ length: 20 }, () => pool.query('SELECT 1')));
      const bucket = `anthropic/${uniqueId('race')}`;
      const limit = { requestsPerMinute: 60, burstSeconds: 1 };
      const cost = { requests: 1, inputTokens: 100, outputTokens: 100 };
      const waits = await Promise.all(
        Array.from({ length: 20 }, (_, i) => takeTurn(pool, { callKey: `${bucket}/${i}`, bucket, limit, cost })),
      );
      const sorted = [...waits].sort((x, y) => x - y);
      expect(sorted[0]).toBe(0);
      expect(sorted[1]).toBeGreaterThan(0);
      // Places a second apart (less the few ms between the transactions' clocks).
      for (let i = 1; i < 20; i++) expect(Math.abs(sorted[i]! - i * 1_000)).toBeLessThan(250);
      const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM rate_places WHERE bucket = $1', [
        bucket,
      ]);
      expect(rows[0]!.n).toBe('19');
    } finally {
      await pool.end();
    }
  });
});

describe('a rate limit shared by two workers', () => {
  it('queues six simultaneous turns one second apart: every one answered once, none failed', async () => {
    const agent = uniqueId('rl');
    const conversations = Array.from({ length: 6 }, (_, i) => `c${i}`);
    const answers = await Promise.all(
      conversations.map((c) => keel.post(agent, c, { text: `hello from ${c} of ${agent}` }, { wait: 60 })),
    );
    expect(answers.map((a) => [a.status, a.body.status, a.body.reply?.text])).toEqual(
      conversations.map(() => [200, 'replied', 'fake: ok']),
    );

    // Exactly one request per turn reached the API, and they came a second apart (the bucket's one request a
    // second), not together: Temporal's retry timer adds at most a few hundred ms of dispatch to each place.
    const sent = requestsOf(agent);
    expect(sent).toHaveLength(6);
    const gaps = sent.slice(1).map((r, i) => r.at - sent[i]!.at);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(800);
    expect(sent[5]!.at - sent[0]!.at).toBeGreaterThanOrEqual(4_500);

    // The waits were retries of the model step (a turn's local activity: its marker holds the attempt it ended on),
    // held by the SDK between attempts, not sleeps in the step; both workers ran turns.
    const identities: string[] = [];
    let waited = 0;
    for (const c of conversations) {
      const id = conversationWorkflowId(agent, c);
      const steps = await localStepsOf(keel, id, 'callTurnModel');
      identities.push(...steps.map((s) => s.identity));
      waited += steps.filter((s) => s.attempt > 1).length;
      const history = await keel.client.workflow.getHandle(id).fetchHistory();
      expect(history.events?.some((e) => e.activityTaskFailedEventAttributes)).toBe(false);
    }
    expect(waited).toBeGreaterThanOrEqual(5);
    for (const w of workers) expect(identities.some((i) => i.startsWith(identityOf(w)))).toBe(true);

    // The ledger booked the API's own usage block: 10 tokens in and 5 out per call (the local API's default).
    const { rows } = await keel.pool.query<{ calls: string; input: string; output: string }>(
      `SELECT count(*) AS calls, sum(input_tokens) AS input, sum(output_tokens) AS output
         FROM model_spend WHERE agent_id = $1`,
      [agent],
    );
    expect(rows[0]).toEqual({ calls: '6', input: '60', output: '30' });
  }, 90_000);

  it('a 429 with retry-after pauses the bucket for every worker for that long; both turns are answered', async () => {
    const agent = uniqueId('rl429');
    fake.enqueue({
      kind: 'status',
      status: 429,
      errorType: 'rate_limit_error',
      message: 'Number of request tokens has exceeded your per-minute rate limit',
      headers: { 'retry-after': '3' },
    });
    const first = keel.post(agent, 'a', { text: `first of ${agent}` }, { wait: 60 });
    // Once the worker has heard the 429 and paused the bucket, a second conversation asks.
    const bucket = `anthropic/${model}`;
    await eventually(
      async () => {
        const { rows } = await keel.pool.query(
          'SELECT 1 FROM rate_buckets WHERE bucket = $1 AND paused_until > now()',
          [bucket],
        );
        return rows.length > 0;
      },
      30_000,
      'the bucket to be paused',
    );
    const second = keel.post(agent, 'b', { text: `second of ${agent}` }, { wait: 60 });
    const answers = await Promise.all([first, second]);
    expect(answers.map((a) => a.body.reply?.text)).toEqual(['fake: ok', 'fake: ok']);

    const sent = requestsOf(agent);
    expect(sent).toHaveLength(3);
    const refusedAt = sent[0]!.at;
    // Neither the retry nor the other conversation's call went before the 3 s the API asked for had passed.
    for (const r of sent.slice(1)) expect(r.at - refusedAt).toBeGreaterThanOrEqual(3_000);
  }, 90_000);
});
