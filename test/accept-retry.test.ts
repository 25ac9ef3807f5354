import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { acceptMessage } from '../services/conversation-turn';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';

/**
 * The API records a message, then hands it to the conversation's workflow. When the hand-over is lost (the API died
 * between the two, or Temporal was down), the message is not: posting it again hands it over again and it is answered
 * once, and a run that starts takes up every turn PostgreSQL has open.
 */

let keel: TestKeel;
beforeAll(async () => {
  keel = await startTestKeel();
});
afterAll(() => keel.stop());

/** What the API commits before its hand-over, as if it died right after. */
async function recordOnly(a: string, c: string, messageId: string, text: string): Promise<void> {
  const conversationKey = conversationWorkflowId(a, c);
  await acceptMessage(
    { pool: keel.pool },
    {
      conversationKey,
      agentId: a,
      conversationId: c,
      turnId: randomUUID(),
      startsTurn: true,
      message: { messageId, text, mode: 'queue' },
    },
  );
}

async function turnStatuses(key: string): Promise<string[]> {
  const { rows } = await keel.pool.query<{ status: string }>(
    'SELECT status FROM turns WHERE conversation_key = $1 ORDER BY accepted_order',
    [key],
  );
  return rows.map((r) => r.status);
}

describe('a message recorded whose hand-over was lost', () => {
  it('is answered once when it is posted again', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    await recordOnly(a, c, `${c}-m1`, 'lost on the way');
    const res = await keel.post(a, c, { text: 'lost on the way', messageId: `${c}-m1` }, { wait: 30 });
    expect(res.body).toMatchObject({ status: 'replied', reply: { text: 'echo: lost on the way' } });
    await eventually(() => quiescent(keel.client, key), 30_000, 'the conversation at rest');
    // Posted once more after its turn ended: the same turn, and nothing runs again.
    const again = await keel.post(a, c, { text: 'lost on the way', messageId: `${c}-m1` });
    expect(again.body).toMatchObject({ turnId: res.body.turnId });
    expect(await turnStatuses(key)).toEqual(['replied']);
  });

  it('is taken up, oldest first, by the run the next message starts', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    await recordOnly(a, c, `${c}-m1`, 'never handed over');
    const res = await keel.post(a, c, { text: 'the next one' }, { wait: 30 });
    expect(res.body).toMatchObject({ status: 'replied', reply: { text: 'echo: the next one' } });
    await eventually(() => quiescent(keel.client, key), 30_000, 'the conversation at rest');
    expect(await turnStatuses(key)).toEqual(['replied', 'replied']);
    const { rows } = await keel.pool.query<{ text: string }>(
      `SELECT text FROM messages WHERE conversation_key = $1 AND role = 'assistant' ORDER BY seq`,
      [key],
    );
    expect(rows.map((r) => r.text)).toEqual(['echo: never handed over', 'echo: the next one']);
  });

  it('is answered in its order of acceptance when a message recorded before it is handed over first', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    await recordOnly(a, c, `${c}-m1`, 'first');
    await recordOnly(a, c, `${c}-m2`, 'second');
    // Only the first is handed over: the run it starts reads both open turns, the second not handed over yet.
    await keel.post(a, c, { text: 'first', messageId: `${c}-m1` });
    await eventually(() => quiescent(keel.client, key), 30_000, 'the conversation at rest');
    expect(await turnStatuses(key)).toEqual(['replied', 'replied']);
    const { rows } = await keel.pool.query<{ role: string; text: string }>(
      `SELECT role, text FROM messages WHERE conversation_key = $1 AND role IN ('user', 'assistant') ORDER BY seq`,
      [key],
    );
    expect(rows.map((r) => `${r.role}: ${r.text}`)).toEqual([
      'user: first',
      'assistant: echo: first',
      'user: second',
      'assistant: echo: second',
    ]);
  });
});
