/**
 * The acceptance of a message commits, and then its activity's completion is lost (a worker killed between the two):
 * Temporal runs the activity again, which finds the message recorded. That is the same acceptance, not a duplicate:
 * the message is still queued and answered once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';

let keel: TestKeel;
const lostOnce = new Set<string>();
beforeAll(async () => {
  keel = await startTestKeel({
    activities: (real) => ({
      acceptMessage: async (input) => {
        const accepted = await real.acceptMessage(input);
        if (input.message.text.startsWith('lose ') && !lostOnce.has(input.message.messageId)) {
          lostOnce.add(input.message.messageId);
          throw new Error('the worker died after the commit');
        }
        return accepted;
      },
    }),
  });
});
afterAll(() => keel.stop());

describe('an acceptance whose completion was lost', () => {
  it('is retried as the same acceptance: the message is answered once', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    const res = await keel.post(a, c, { text: 'lose the first reply', messageId: `${c}-m1` }, { wait: 30 });
    expect(lostOnce.has(`${c}-m1`)).toBe(true);
    expect(res.body).toMatchObject({ status: 'replied', reply: { text: 'echo: lose the first reply' } });
    await eventually(() => quiescent(keel.client, key), 30_000, 'the conversation at rest');
    const { rows } = await keel.pool.query<{ status: string }>('SELECT status FROM turns WHERE conversation_key = $1', [
      key,
    ]);
    expect(rows).toEqual([{ status: 'replied' }]);
  });
});
