import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { noneTransport } from '../activities/delivery/none';
import { slackTransport } from '../activities/delivery/slack';
import type { OutboundMessage } from '../activities/delivery/transport';
import { signWebhookBody, webhookTransport } from '../activities/delivery/webhook';
import { startFakeSlack } from './support/fake-slack';
import { startWebhookReceiver } from './support/webhook-receiver';

const message: OutboundMessage = {
  agentId: 'agent-1',
  conversationId: 'conv-1',
  turnId: 'turn-1',
  text: 'Hello from Keel',
  idempotencyKey: 'delivery:turn-1:0',
};

const live = (): AbortSignal => new AbortController().signal;

/** A port nothing listens on: bind a free one, then release it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  return port;
}

describe('webhook transport', () => {
  it('delivers 2xx with the idempotency key and a signature the receiver verifies', async () => {
    const receiver = await startWebhookReceiver({ secret: 's3cret' });
    try {
      const result = await webhookTransport().send(
        { channel: 'webhook', url: receiver.url, secret: 's3cret' },
        message,
        live(),
      );
      expect(result).toEqual({ ok: true, detail: 'http_200' });
      expect(receiver.received).toHaveLength(1);
      const [got] = receiver.received;
      expect(got?.headers['idempotency-key']).toBe(message.idempotencyKey);
      expect(got?.headers['content-type']).toBe('application/json');
      expect(got?.body).toEqual(message);
      expect(got?.validSignature).toBe(true);
      // The signature covers the exact bytes and timestamp that were sent.
      const timestamp = String(got?.headers['x-keel-timestamp']);
      expect(timestamp).toMatch(/^\d{10}$/);
      expect(got?.headers['x-keel-signature']).toBe(signWebhookBody('s3cret', timestamp, got?.raw ?? ''));
      expect(receiver.byIdempotencyKey()).toEqual(new Map([[message.idempotencyKey, 1]]));
    } finally {
      await receiver.close();
    }
  });

  it('produces a signature the receiver rejects when the secrets differ', async () => {
    const receiver = await startWebhookReceiver({ secret: 'receiver-secret' });
    try {
      const result = await webhookTransport().send(
        { channel: 'webhook', url: receiver.url, secret: 'other-secret' },
        message,
        live(),
      );
      expect(result.ok).toBe(true);
      expect(receiver.received[0]?.validSignature).toBe(false);
    } finally {
      await receiver.close();
    }
  });

  it('sends no signature without a secret', async () => {
    const receiver = await startWebhookReceiver({ secret: 'receiver-secret' });
    try {
      await webhookTransport().send({ channel: 'webhook', url: receiver.url }, message, live());
      expect(receiver.received[0]?.headers['x-keel-signature']).toBeUndefined();
      expect(receiver.received[0]?.validSignature).toBe(false);
    } finally {
      await receiver.close();
    }
  });

  it('reports 503 as retryable, and the retry carries the same idempotency key', async () => {
    const receiver = await startWebhookReceiver({ failFirst: 1 });
    try {
      const transport = webhookTransport();
      const target = { channel: 'webhook' as const, url: receiver.url };
      expect(await transport.send(target, message, live())).toEqual({ ok: false, retryable: true, reason: 'http_503' });
      expect(await transport.send(target, message, live())).toEqual({ ok: true, detail: 'http_200' });
      await receiver.waitFor((r) => r.length === 2, 1000);
      expect(receiver.received.map((r) => r.status)).toEqual([503, 200]);
      // Only the accepted attempt counts as a delivery.
      expect(receiver.byIdempotencyKey()).toEqual(new Map([[message.idempotencyKey, 1]]));
    } finally {
      await receiver.close();
    }
  });

  it('reports 429 as retryable', async () => {
    const receiver = await startWebhookReceiver({ failFirst: 1, failStatus: 429 });
    try {
      const result = await webhookTransport().send({ channel: 'webhook', url: receiver.url }, message, live());
      expect(result).toEqual({ ok: false, retryable: true, reason: 'http_429' });
    } finally {
      await receiver.close();
    }
  });

  it('reports 404 as non-retryable', async () => {
    const receiver = await startWebhookReceiver({ failFirst: 1, failStatus: 404 });
    try {
      const result = await webhookTransport().send({ channel: 'webhook', url: receiver.url }, message, live());
      expect(result).toEqual({ ok: false, retryable: false, reason: 'http_404' });
    } finally {
      await receiver.close();
    }
  });

  it('reports an unreachable port as a retryable network error', async () => {
    const port = await closedPort();
    const result = await webhookTransport().send(
      { channel: 'webhook', url: `http://127.0.0.1:${port}/hook` },
      message,
      live(),
    );
    expect(result).toEqual({ ok: false, retryable: true, reason: 'network' });
  });

  it('reports a receiver that never answers as a retryable timeout', async () => {
    // Accepts the request and never responds, so only the transport's timeout can end the attempt.
    const server = createServer(() => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as AddressInfo;
    try {
      const result = await webhookTransport({ timeoutMs: 100 }).send(
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
      const send = webhookTransport().send(
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
      const result = await slackTransport({ token: 'xoxb-test', apiUrl: slack.url }).send(
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
      const result = await slackTransport({ token: 'xoxb-test', apiUrl: slack.url.replace(/\/$/, '') }).send(
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
      const result = await slackTransport({ token: 'xoxb-test', apiUrl: slack.url, owner: 'U0OWNER1' }).send(
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
      const result = await slackTransport({ token: 'xoxb-test', apiUrl: slack.url }).send(
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
      const result = await slackTransport({ apiUrl: slack.url, owner: 'U0OWNER1' }).send(
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
      const result = await slackTransport({ token: 'xoxb-test', apiUrl: slack.url }).send(
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
      const result = await slackTransport({ token: 'xoxb-test', apiUrl: slack.url }).send(
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
      const result = await slackTransport({ token: 'xoxb-test', apiUrl: slack.url }).send(
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
      const transport = slackTransport({ token: 'xoxb-test', apiUrl: slack.url });
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
    const result = await slackTransport({ token: 'xoxb-test', apiUrl: `http://127.0.0.1:${port}/api/` }).send(
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
