/**
 * Many messages to one conversation at the same instant. Temporal delivers them to the workflow in speculative
 * workflow tasks, which it may discard and deliver again in another grouping; the short steps that record them run
 * inside those tasks (local activities), so each message must still be recorded, queued and answered exactly once.
 */
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';

let keel: TestKeel;
beforeAll(async () => {
  keel = await startTestKeel();
});
afterAll(() => keel.stop());

describe('20 messages to one conversation at once', () => {
  it('are all accepted, and each is answered exactly once, in its own turn', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    expect((await keel.post(a, c, { text: 'warm' }, { wait: 30 })).body.status).toBe('replied');
    const sent = await Promise.all(
      Array.from({ length: 20 }, (_, i) => keel.post(a, c, { text: `m${i}`, messageId: `${c}-m${i}` })),
    );
    expect(sent.map((r) => r.status)).toEqual(Array.from({ length: 20 }, () => 202));
    expect(new Set(sent.map((r) => r.body.turnId)).size).toBe(20);

    await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ n: string }>(
          "SELECT count(*) AS n FROM turns WHERE conversation_key = $1 AND status = 'replied'",
          [key],
        );
        return Number(rows[0]!.n) === 21;
      },
      60_000,
      '21 replies',
    );
    await eventually(() => quiescent(keel.client, key), 30_000, 'the conversation at rest');
    const { rows } = await keel.pool.query<{ text: string }>(
      "SELECT text FROM messages WHERE conversation_key = $1 AND role = 'assistant' ORDER BY seq",
      [key],
    );
    expect(rows.map((r) => r.text).sort()).toEqual(
      ['echo: warm', ...Array.from({ length: 20 }, (_, i) => `echo: m${i}`)].sort(),
    );
    const turns = await keel.pool.query<{ n: string }>('SELECT count(*) AS n FROM turns WHERE conversation_key = $1', [
      key,
    ]);
    expect(Number(turns.rows[0]!.n)).toBe(21);

    // A worker that lost its cache replays this history: it must take the same steps in the same order.
    const history = await keel.client.workflow.getHandle(key).fetchHistory();
    await expect(
      Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history, key),
    ).resolves.toBeUndefined();
  });
});
