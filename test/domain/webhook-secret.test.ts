import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { Delivery } from '../../domain/delivery';
import { WEBHOOK_SECRET_MESSAGE, WEBHOOK_SECRET_PATTERN } from '../../domain/webhook-secret';

const whsec = (bytes: number) => `whsec_${randomBytes(bytes).toString('base64')}`;
const accepts = (secret: string) => WEBHOOK_SECRET_PATTERN.test(secret);

describe('webhook secret format', () => {
  it('accepts a whsec_ secret of exactly 24 to 64 bytes, which the receiver library decodes to those bytes', () => {
    for (let bytes = 1; bytes <= 70; bytes++) {
      const secret = whsec(bytes);
      expect([bytes, accepts(secret)]).toEqual([bytes, bytes >= 24 && bytes <= 64]);
      // The receiver's library decodes it to those bytes: its signature is the HMAC keyed with them.
      const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
      const hmac = createHmac('sha256', key).update('id.1700000000.{}').digest('base64');
      expect(new Webhook(secret).sign('id', new Date(1_700_000_000_000), '{}')).toBe(`v1,${hmac}`);
    }
  });

  it('refuses a whsec_ secret a receiver library could not decode', () => {
    const b64 = randomBytes(32).toString('base64'); // 44 characters, one '=' of padding
    expect(accepts(`whsec_${b64}`)).toBe(true);
    expect(accepts(`whsec_${b64.replace(/=+$/, '')}`)).toBe(false); // padding missing
    expect(accepts(`whsec_${'-_'.repeat(16)}`)).toBe(false); // URL-safe alphabet
    expect(accepts(`whsec_${b64} `)).toBe(false);
    expect(accepts('whsec_')).toBe(false);
    expect(() => new Webhook(`whsec_${'-_'.repeat(16)}`)).toThrow();
  });

  it('accepts any plain secret, as before', () => {
    for (const secret of ['s3cret', 'x', 'Whsec_not-the-prefix', 'whsec', 'p4ss word with spaces', 'ünïcödé'])
      expect([secret, accepts(secret)]).toEqual([secret, true]);
  });
  it('is checked by the Delivery schema, with the message naming the rule', () => {
    const url = 'http://127.0.0.1:9000/hook';
    expect(Delivery.safeParse({ channel: 'webhook', url, secret: whsec(32) }).success).toBe(true);
    expect(Delivery.safeParse({ channel: 'webhook', url, secret: 's3cret' }).success).toBe(true);
    const bad = Delivery.safeParse({ channel: 'webhook', url, secret: whsec(16) });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([['secret', WEBHOOK_SECRET_MESSAGE]]);
  });
});
