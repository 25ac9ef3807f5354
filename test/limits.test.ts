import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliverOnce } from '../services/delivery';
import { noneTransport } from '../adapters/delivery/none';
import { slackTransport } from '../adapters/delivery/slack';
import { webhookTransport } from '../adapters/delivery/webhook';
import { conversationWorkflowId } from '../domain/ids';
import { queueAnswer, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';
import { loopbackEgress } from './support/egress';

/**
 * The limits of a turn and of a delivery, by behaviour and with their literal values (5 model calls, 6 send
 * attempts): the tests elsewhere count with the code's own constants, which a changed constant would carry along.
 */
let keel: TestKeel;
let hook: WebhookReceiver;
beforeAll(async () => {
  keel = await startTestKeel();
  hook = await startWebhookReceiver({ failFirst: 1_000, failStatus: 503 });
});
afterAll(async () => {
  await keel?.stop();
  await hook?.close();
});

describe('limits by behaviour, with their literal values', () => {
  it('a turn that never replies ends after exactly 5 model calls', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    // Seven answers that call a tool and never reply: only the limit can end the turn.
    for (let i = 0; i < 7; i++) {
      await queueAnswer(keel, a, c, {
        content: [{ type: 'tool_use', id: `toolu_${i}`, name: 'keep_busy', input: {} }],
        stopReason: 'tool_use',
        usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
      });
    }
    const res = await keel.post(a, c, { text: 'loop forever' }, { wait: 30 });
    expect(res.body).toMatchObject({
      status: 'error',
      error: { code: 'max_model_calls', message: 'the turn used its 5 model calls without replying' },
    });
    const { rows } = await keel.pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM model_calls WHERE conversation_key = $1',
      [conversationWorkflowId(a, c)],
    );
    expect(Number(rows[0]!.n)).toBe(5);
  });

  it('a delivery to a target that keeps failing gives up after exactly 6 send attempts', async () => {
    const transports = {
      none: noneTransport(),
      webhook: webhookTransport({ egress: loopbackEgress }),
      slack: slackTransport({ egress: loopbackEgress }),
    };
    const effectKey = `limits/${randomUUID()}`;
    const delivery = {
      effectKey,
      conversationKey: null,
      turnId: null,
      target: { channel: 'webhook' as const, url: hook.url },
      message: { agentId: 'a', conversationId: 'c', turnId: 't', text: 'hello', idempotencyKey: effectKey },
      signal: new AbortController().signal,
    };
    // Each call is one attempt, as Temporal's retries make them; a retryable failure throws until the last one.
    const failures: string[] = [];
    let report: Awaited<ReturnType<typeof deliverOnce>> | undefined;
    for (let call = 1; call <= 10 && !report; call++) {
      try {
        report = await deliverOnce(keel.pool, transports, delivery);
      } catch (err) {
        failures.push(err instanceof Error ? err.message : String(err));
      }
    }
    expect(report).toEqual({ outcome: 'error:http_503', attempts: 6 });
    expect(failures).toHaveLength(5);
    expect(failures.at(-1)).toBe('delivery attempt 5 failed: http_503');
    // Once given up, another attempt answers from the ledger and sends nothing.
    expect(await deliverOnce(keel.pool, transports, delivery)).toEqual(report);
    const sent = hook.received.filter((r) => r.headers['idempotency-key'] === effectKey);
    expect(sent).toHaveLength(6);
  });
});
