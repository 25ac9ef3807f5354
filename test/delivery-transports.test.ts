import { createHmac, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { noneTransport } from '../adapters/delivery/none';
import { slackTransport } from '../adapters/delivery/slack';
import type { OutboundMessage } from '../adapters/delivery/transport';
import { webhookTransport } from '../adapters/delivery/webhook';
import { parseEgressAllow } from '../domain/egress';
import { createEgressGuard } from '../adapters/egress';
import { startFakeSlack } from './support/fake-slack';
import { startWebhookReceiver, type ReceivedWebhook } from './support/webhook-receiver';

const message: OutboundMessage = {
  agentId: 'agent-1',
  conversationId: 'conv-1',
  turnId: 'turn-1',
  text: 'Hello from Keel',
  idempotencyKey: 'delivery:turn-1:0',
};

const live = (): AbortSignal => new AbortController().signal;

// Every server here is on 127.0.0.1: the transports get a guard that allows loopback, explicitly.
const egress = createEgressGuard({ allow: parseEgressAllow('loopback') });
afterAll(() => egress.close());
const webhook = (opts: { timeoutMs?: number } = {}) => webhookTransport({ ...opts, egress });

/** A fresh Standard Webhooks secret, as a person would generate one: whsec_ + base64 of 32 random bytes. */
const whsec = () => `whsec_${randomBytes(32).toString('base64')}`;

/** The request's headers as the receiver library takes them. */
function headersOf(r: ReceivedWebhook): Record<string, string> {
  return Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)]));
}

/** A port nothing listens on: bind a free one, then release it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  return port;
}

describe('webhook transport', () => {
  it('sends Standard Webhooks headers the standardwebhooks library verifies, and the key', async () => {
    const secret = whsec();
    const receiver = await startWebhookReceiver({ secret });
    try {
      const before = Math.floor(Date.now() / 1000);
      const result = await webhook().send({ channel: 'webhook', url: receiver.url, secret }, message, live());
      expect(result).toEqual({ ok: true, detail: 'http_200' });
      expect(receiver.received).toHaveLength(1);
      const [got] = receiver.received;
      expect(got?.validSignature).toBe(true);
      expect(got?.body).toEqual(message);
      expect(got?.headers['content-type']).toBe('application/json');
      expect(got?.headers['webhook-id']).toBe(message.idempotencyKey);
      expect(got?.headers['idempotency-key']).toBe(message.idempotencyKey);
      const timestamp = Number(got?.headers['webhook-timestamp']);
      expect(timestamp).toBeGreaterThanOrEqual(before);
      expect(timestamp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
      // The spec's formula, computed here without the library: v1,<base64 HMAC-SHA256(key, "<id>.<ts>.<body>")>.
      const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
      const expected = createHmac('sha256', key).update(`${message.idempotencyKey}.${timestamp}.${got?.raw}`);
      expect(got?.headers['webhook-signature']).toBe(`v1,${expected.digest('base64')}`);
      // The scheme it replaces is gone.
      expect(Object.keys(got?.headers ?? {}).filter((h) => h.startsWith('x-keel-'))).toEqual([]);
      expect(receiver.byIdempotencyKey()).toEqual(new Map([[message.idempotencyKey, 1]]));
    } finally {
      await receiver.close();
    }
  });

  it('a receiver with another secret fails verification', async () => {
    const receiver = await startWebhookReceiver({ secret: whsec() });
    try {
      const result = await webhook().send({ channel: 'webhook', url: receiver.url, secret: whsec() }, message, live());
      expect(result.ok).toBe(true);
      expect(receiver.received[0]?.validSignature).toBe(false);
      expect(receiver.received[0]?.verifyError).toBe('No matching signature found');
    } finally {
      await receiver.close();
    }
  });

  it('a receiver that checks signatures refuses the delivery for good when the secrets differ', async () => {
    const receiver = await startWebhookReceiver({ secret: 'receiver-secret', rejectUnverified: true });
    try {
      const result = await webhook().send(
        { channel: 'webhook', url: receiver.url, secret: 'other-secret' },
        message,
        live(),
      );
      expect(result).toEqual({ ok: false, retryable: false, reason: 'http_401' });
      expect(receiver.received.map((r) => [r.status, r.validSignature])).toEqual([[401, false]]);
    } finally {
      await receiver.close();
    }
  });

  it('signs with a plain secret’s UTF-8 bytes: the key whsec_ + their base64 names', async () => {
    // An ASCII secret verifies with the library's raw format (what the test receiver does for a plain secret).
    const ascii = await startWebhookReceiver({ secret: 's3cret' });
    const unicode = await startWebhookReceiver();
    try {
      await webhook().send({ channel: 'webhook', url: ascii.url, secret: 's3cret' }, message, live());
      expect(ascii.received[0]?.validSignature).toBe(true);

      const secret = 'pässwörd 🔑';
      await webhook().send({ channel: 'webhook', url: unicode.url, secret }, message, live());
      const [got] = unicode.received;
      const asWhsec = `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;
      expect(new Webhook(asWhsec).verify(got?.raw ?? '', headersOf(got!))).toEqual(message);
      expect(() => new Webhook(whsec()).verify(got?.raw ?? '', headersOf(got!))).toThrow('No matching signature');
    } finally {
      await ascii.close();
      await unicode.close();
    }
  });

  it('a changed body, or the same request presented after the tolerance, fails verification', async () => {
    const secret = whsec();
    const receiver = await startWebhookReceiver({ secret });
    try {
      await webhook().send({ channel: 'webhook', url: receiver.url, secret }, message, live());
      const [got] = receiver.received;
      const wh = new Webhook(secret);
      expect(wh.verify(got?.raw ?? '', headersOf(got!))).toEqual(message);
      const tampered = (got?.raw ?? '').replace('Hello from Keel', 'Hello from Eve');
      expect(() => wh.verify(tampered, headersOf(got!))).toThrow('No matching signature found');
      // The timestamp is signed too: a captured request replayed more than 5 minutes later is refused.
      vi.useFakeTimers({ now: Date.now() + 6 * 60_000, toFake: ['Date'] });
      try {
        expect(() => wh.verify(got?.raw ?? '', headersOf(got!))).toThrow('Message timestamp too old');
      } finally {
        vi.useRealTimers();
      }
    } finally {
      await receiver.close();
    }
  });

  it('a dotted idempotency key becomes a webhook-id without dots that decodes back to it', async () => {
    const secret = whsec();
    const receiver = await startWebhookReceiver({ secret });
    try {
      const idempotencyKey = 'conv:a.1:c.x%y/turn/t-1/reply/1';
      await webhook().send({ channel: 'webhook', url: receiver.url, secret }, { ...message, idempotencyKey }, live());
      const [got] = receiver.received;
      expect(got?.headers['webhook-id']).toBe('conv:a%2E1:c%2Ex%25y/turn/t-1/reply/1');
      expect(decodeURIComponent(String(got?.headers['webhook-id']))).toBe(idempotencyKey);
      expect(got?.headers['idempotency-key']).toBe(idempotencyKey);
      expect(got?.validSignature).toBe(true);
    } finally {
      await receiver.close();
    }
  });

  it('sends webhook-id and webhook-timestamp but no signature without a secret', async () => {
    const receiver = await startWebhookReceiver({ secret: whsec() });
    try {
      await webhook().send({ channel: 'webhook', url: receiver.url }, message, live());
      const [got] = receiver.received;
      expect(got?.headers['webhook-id']).toBe(message.idempotencyKey);
      expect(got?.headers['webhook-timestamp']).toMatch(/^\d{10}$/);
      expect(got?.headers['webhook-signature']).toBeUndefined();
      expect([got?.validSignature, got?.verifyError]).toEqual([false, 'Missing required headers']);
    } finally {
      await receiver.close();
    }
  });

  it('drops a delivery whose whsec_ secret does not decode, without sending it', async () => {
    const receiver = await startWebhookReceiver();
    try {
      // The schema refuses such a secret now; one stored before that can never be signed, so it is not retried.
      const result = await webhook().send(
        { channel: 'webhook', url: receiver.url, secret: 'whsec_!!!' },
        message,
        live(),
      );
      expect(result).toEqual({ ok: false, retryable: false, reason: 'invalid_secret' });
      expect(receiver.received).toHaveLength(0);
    } finally {
      await receiver.close();
    }
  });

  it('reports 503 as retryable; the retry carries the same webhook-id and its own valid signature', async () => {
    const secret = whsec();
    const receiver = await startWebhookReceiver({ secret, failFirst: 1 });
    try {
      const transport = webhook();
      const target = { channel: 'webhook' as const, url: receiver.url, secret };
      expect(await transport.send(target, message, live())).toEqual({ ok: false, retryable: true, reason: 'http_503' });
      expect(await transport.send(target, message, live())).toEqual({ ok: true, detail: 'http_200' });
      await receiver.waitFor((r) => r.length === 2, 1000);
      expect(receiver.received.map((r) => [r.status, r.headers['webhook-id'], r.validSignature])).toEqual([
        [503, message.idempotencyKey, true],
        [200, message.idempotencyKey, true],
      ]);
      // Only the accepted attempt counts as a delivery.
      expect(receiver.byIdempotencyKey()).toEqual(new Map([[message.idempotencyKey, 1]]));
    } finally {
      await receiver.close();
    }
  });

  it('reports 429 as retryable', async () => {
    const receiver = await startWebhookReceiver({ failFirst: 1, failStatus: 429 });
    try {
      const result = await webhook().send({ channel: 'webhook', url: receiver.url }, message, live());
      expect(result).toEqual({ ok: false, retryable: true, reason: 'http_429' });
    } finally {
      await receiver.close();
    }
  });

  it('reports 404 as non-retryable', async () => {
    const receiver = await startWebhookReceiver({ failFirst: 1, failStatus: 404 });
    try {
      const result = await webhook().send({ channel: 'webhook', url: receiver.url }, message, live());
      expect(result).toEqual({ ok: false, retryable: false, reason: 'http_404' });
    } finally {
      await receiver.close();
    }
  });

  it('reports an unreachable port as a retryable network error', async () => {
    const port = await closedPort();
    const result = await webhook().send({ channel: 'webhook', url: `http://127.0.0.1:${port}/hook` }, message, live());
    expect(result).toEqual({ ok: false, retryable: true, reason: 'network' });
  });

  it('reports a receiver that never answers as a retryable timeout', async () => {
    // Accepts the request and never responds, so only the transport's timeout can end the attempt.
    const server = createServer(() => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as AddressInfo;
    try {
      const result = await webhook({ timeoutMs: 100 }).send(
        { channel: 'webhook', url: `http://127.0.0.1:${port}/hook` },
        message,
        live(),
      );
      expect(result).toEqual({ ok: false, retryable: true, reason: 'timeout' });
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('rethrows when the caller cancels instead of reporting a failure', async () => {
    const controller = new AbortController();
    // Cancel as soon as the request reaches the server, before it answers.
    const server = createServer(() => controller.abort(new Error('activity cancelled')));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as AddressInfo;
    try {
      const send = webhook().send(
        { channel: 'webhook', url: `http://127.0.0.1:${port}/hook` },
        message,
        controller.signal,
      );
      await expect(send).rejects.toThrow('activity cancelled');
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe('slack transport', () => {
  it('posts to a C… channel with the bot token', async () => {
    const slack = await startFakeSlack();
    try {
      const result = await slackTransport({ egress, token: 'xoxb-test', apiUrl: slack.url }).send(
        { channel: 'slack', target: 'C0123ABC' },
        message,
        live(),
      );
      expect(result).toEqual({ ok: true, detail: '1700000000.000100' });
      expect(slack.calls).toHaveLength(1);
      expect(slack.calls[0]).toMatchObject({
        method: 'chat.postMessage',
        body: { channel: 'C0123ABC', text: message.text },
        auth: 'Bearer xoxb-test',
      });
    } finally {
      await slack.close();
    }
  });

  it('accepts an API URL without the trailing slash', async () => {
    const slack = await startFakeSlack();
    try {
      const result = await slackTransport({ egress, token: 'xoxb-test', apiUrl: slack.url.replace(/\/$/, '') }).send(
        { channel: 'slack', target: 'U0123ABC' },
        message,
        live(),
      );
      expect(result.ok).toBe(true);
      expect(slack.calls[0]?.method).toBe('chat.postMessage');
    } finally {
      await slack.close();
    }
  });

  it('resolves target owner to the configured owner', async () => {
    const slack = await startFakeSlack();
    try {
      const result = await slackTransport({ egress, token: 'xoxb-test', apiUrl: slack.url, owner: 'U0OWNER1' }).send(
        { channel: 'slack', target: 'owner' },
        message,
        live(),
      );
      expect(result.ok).toBe(true);
      expect(slack.calls[0]?.body.channel).toBe('U0OWNER1');
    } finally {
      await slack.close();
    }
  });

  it('fails owner_unknown without calling Slack when no owner is configured', async () => {
    const slack = await startFakeSlack();
    try {
      const result = await slackTransport({ egress, token: 'xoxb-test', apiUrl: slack.url }).send(
        { channel: 'slack', target: 'owner' },
        message,
        live(),
      );
      expect(result).toEqual({ ok: false, retryable: false, reason: 'owner_unknown' });
      expect(slack.calls).toHaveLength(0);
    } finally {
      await slack.close();
    }
  });

  it('fails slack_not_configured without a token', async () => {
    const slack = await startFakeSlack();
    try {
      const result = await slackTransport({ egress, apiUrl: slack.url, owner: 'U0OWNER1' }).send(
        { channel: 'slack', target: 'C0123ABC' },
        message,
        live(),
      );
      expect(result).toEqual({ ok: false, retryable: false, reason: 'slack_not_configured' });
      expect(slack.calls).toHaveLength(0);
    } finally {
      await slack.close();
    }
  });

  it('reports channel_not_found as non-retryable', async () => {
    const slack = await startFakeSlack();
    slack.enqueue({ ok: false, error: 'channel_not_found' });
    try {
      const result = await slackTransport({ egress, token: 'xoxb-test', apiUrl: slack.url }).send(
        { channel: 'slack', target: 'C0GONE00' },
        message,
        live(),
      );
      expect(result).toEqual({ ok: false, retryable: false, reason: 'channel_not_found' });
      expect(slack.calls).toHaveLength(1);
    } finally {
      await slack.close();
    }
  });

  it('reports a transient platform error as retryable', async () => {
    const slack = await startFakeSlack();
    slack.enqueue({ ok: false, error: 'internal_error' });
    try {
      const result = await slackTransport({ egress, token: 'xoxb-test', apiUrl: slack.url }).send(
        { channel: 'slack', target: 'C0123ABC' },
        message,
        live(),
      );
      expect(result).toEqual({ ok: false, retryable: true, reason: 'internal_error' });
    } finally {
      await slack.close();
    }
  });

  it('reports 429 as retryable rate_limited without waiting out Retry-After', async () => {
    const slack = await startFakeSlack();
    // A 30 s Retry-After would time the test out if the SDK honoured it itself.
    slack.enqueue({ status: 429, retryAfter: 30 });
    try {
      const result = await slackTransport({ egress, token: 'xoxb-test', apiUrl: slack.url }).send(
        { channel: 'slack', target: 'C0123ABC' },
        message,
        live(),
      );
      expect(result).toEqual({ ok: false, retryable: true, reason: 'rate_limited' });
      expect(slack.calls).toHaveLength(1);
    } finally {
      await slack.close();
    }
  });

  it('makes exactly one HTTP call on a 5xx: the SDK does not retry', async () => {
    const slack = await startFakeSlack();
    slack.enqueue({ status: 503 });
    try {
      const transport = slackTransport({ egress, token: 'xoxb-test', apiUrl: slack.url });
      const result = await transport.send({ channel: 'slack', target: 'C0123ABC' }, message, live());
      expect(result).toEqual({ ok: false, retryable: true, reason: 'http_503' });
      expect(slack.calls).toHaveLength(1);
      // The next send is a fresh single attempt (Temporal's retry), and succeeds.
      expect((await transport.send({ channel: 'slack', target: 'C0123ABC' }, message, live())).ok).toBe(true);
      expect(slack.calls).toHaveLength(2);
    } finally {
      await slack.close();
    }
  });

  it('reports an unreachable Slack as a retryable network error', async () => {
    const port = await closedPort();
    const result = await slackTransport({ egress, token: 'xoxb-test', apiUrl: `http://127.0.0.1:${port}/api/` }).send(
      { channel: 'slack', target: 'C0123ABC' },
      message,
      live(),
    );
    expect(result).toEqual({ ok: false, retryable: true, reason: 'network' });
  });
});

describe('none transport', () => {
  it('sends nothing and reports channel_none as non-retryable', async () => {
    const transport = noneTransport();
    expect(transport.channel).toBe('none');
    expect(await transport.send({ channel: 'none' }, message, live())).toEqual({
      ok: false,
      retryable: false,
      reason: 'channel_none',
    });
  });
});
