import { describe, expect, it } from 'vitest';
import { Delivery, NO_DELIVERY, outcomeKind } from '../../domain/delivery';
import { LIMITS } from '../../domain/limits';
import {
  SubmitMessageBody,
  TEXT_TOO_LARGE,
  assertValidInbound,
  utf8Bytes,
  type InboundMessage,
} from '../../domain/messages';

describe('utf8Bytes', () => {
  it.each([
    ['empty', ''],
    ['ASCII', 'Hello, world! 0123456789 ~'],
    ['2-byte characters', 'é ü ß ñ Ω д'],
    ['3-byte characters', '€ 中文 日本語 ✓ \u2028'],
    ['4-byte characters', '😀 🎉 𝄞 𠜎'],
    ['a ZWJ emoji sequence', '👩‍👩‍👧‍👦 👍🏽'],
    ['a mix', 'a é € 😀 z'],
    ['the boundaries of each width', '\u007f\u0080\u07ff\u0800\uffff\u{10000}\u{10ffff}'],
    ['a lone high surrogate at the end', 'abc\ud800'],
    ['a lone high surrogate before ASCII', '\ud800abc'],
    ['a lone low surrogate', 'a\udc00b'],
    ['a low surrogate before a high one', '\udc00\ud800'],
    ['a pair after a lone low surrogate', '\udc00\ud83d\ude00'],
  ])('agrees with Buffer.byteLength on %s', (_what, text) => {
    expect(utf8Bytes(text)).toBe(Buffer.byteLength(text, 'utf8'));
  });

  // BUG (domain/messages.ts, utf8Bytes, the `c >= 0xd800 && c <= 0xdbff && i + 1 < text.length` branch): a high
  // surrogate is counted as a 4-byte pair without checking that the next unit is a low surrogate (0xdc00–0xdfff),
  // and the next unit is skipped. '\ud800\ud800' → expected 6 (each lone surrogate encodes as U+FFFD, 3 bytes),
  // actual 4; '\ud800€' → expected 6, actual 4; '\ud800é' → expected 5, actual 4.
  it.each([
    ['two lone high surrogates', '\ud800\ud800'],
    ['a lone high surrogate before a 3-byte character', '\ud800€'],
    ['a lone high surrogate before a 2-byte character', '\ud800é'],
  ])('agrees with Buffer.byteLength on %s', (_what, text) => {
    expect(utf8Bytes(text)).toBe(Buffer.byteLength(text, 'utf8'));
  });
});

describe('SubmitMessageBody', () => {
  it('accepts a minimal body', () => {
    expect(SubmitMessageBody.parse({ text: 'hi' })).toEqual({ text: 'hi' });
  });

  it('accepts a full body', () => {
    const body = {
      text: 'hello',
      messageId: 'msg-1',
      author: 'ada',
      mode: 'steer',
      delivery: { channel: 'webhook', url: 'https://example.com/hook', secret: 's3cret' },
    };
    expect(SubmitMessageBody.parse(body)).toEqual(body);
  });

  it.each(['queue', 'steer', 'interrupt'])('accepts mode %s', (mode) => {
    expect(SubmitMessageBody.safeParse({ text: 'hi', mode }).success).toBe(true);
  });

  it.each(['', ' ', '\n\t  '])('refuses the empty or blank text %j', (text) => {
    const r = SubmitMessageBody.safeParse({ text });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.path).toEqual(['text']);
    expect(r.error?.issues[0]?.message).toMatch(/empty/);
  });

  it('refuses a missing or non-string text', () => {
    expect(SubmitMessageBody.safeParse({}).success).toBe(false);
    expect(SubmitMessageBody.safeParse({ text: 42 }).success).toBe(false);
  });

  it('accepts a text of exactly 32 KiB', () => {
    expect(LIMITS.messageTextBytes).toBe(32768);
    expect(SubmitMessageBody.safeParse({ text: 'a'.repeat(32768) }).success).toBe(true);
    // 8192 four-byte characters are exactly 32768 bytes.
    expect(SubmitMessageBody.safeParse({ text: '😀'.repeat(8192) }).success).toBe(true);
  });

  it.each([
    ['ASCII', 'a'.repeat(32769)],
    ['multi-byte characters under the limit in length', '€'.repeat(11000)],
    ['emoji', '😀'.repeat(8192) + 'a'],
  ])('refuses a text over 32 KiB (%s) with the text_too_large code', (_what, text) => {
    expect(text.length).toBeLessThanOrEqual(32769);
    const r = SubmitMessageBody.safeParse({ text });
    expect(r.success).toBe(false);
    const issue = r.error?.issues.find((i) => i.path.join('.') === 'text');
    expect(issue?.code).toBe('custom');
    expect(issue && 'params' in issue ? issue.params : undefined).toEqual({ keelCode: TEXT_TOO_LARGE });
    expect(TEXT_TOO_LARGE).toBe('text_too_large');
  });

  // BUG (domain/messages.ts, utf8Bytes; see above): lone high surrogates in pairs are counted 4 bytes per pair
  // instead of 6, so a text that is 49152 bytes once encoded (16384 × '\ud800') passes the 32 KiB limit.
  // Expected: refused with text_too_large; actual: accepted.
  it('refuses a text of lone surrogates that is over 32 KiB once encoded', () => {
    const text = '\ud800'.repeat(16384);
    expect(Buffer.byteLength(text, 'utf8')).toBe(49152);
    expect(SubmitMessageBody.safeParse({ text }).success).toBe(false);
  });

  it.each(['broadcast', 'QUEUE', ''])('refuses the unknown mode %j', (mode) => {
    const r = SubmitMessageBody.safeParse({ text: 'hi', mode });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.path).toEqual(['mode']);
  });

  it('refuses unknown fields', () => {
    const r = SubmitMessageBody.safeParse({ text: 'hi', priority: 'high' });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.code).toBe('unrecognized_keys');
  });

  it.each(['', 'has space', 'tab\there', 'é', 'x'.repeat(201)])('refuses the messageId %j', (messageId) => {
    expect(SubmitMessageBody.safeParse({ text: 'hi', messageId }).success).toBe(false);
  });

  it('accepts printable-ASCII message ids up to 200 characters', () => {
    expect(SubmitMessageBody.safeParse({ text: 'hi', messageId: 'a:b/c!~' }).success).toBe(true);
    expect(SubmitMessageBody.safeParse({ text: 'hi', messageId: 'x'.repeat(200) }).success).toBe(true);
  });
});

describe('Delivery', () => {
  it.each([
    { channel: 'none' },
    { channel: 'webhook', url: 'https://example.com/hooks/keel' },
    { channel: 'webhook', url: 'http://127.0.0.1:8080/hook?x=1#frag' },
    { channel: 'webhook', url: 'HTTPS://EXAMPLE.COM' },
    { channel: 'webhook', url: 'https://example.com/hook', secret: `whsec_${Buffer.alloc(24, 7).toString('base64')}` },
    { channel: 'webhook', url: 'https://example.com/hook', secret: 's3cret' },
    { channel: 'slack', target: 'owner' },
    { channel: 'slack', target: 'C0123ABCD' },
    { channel: 'slack', target: 'U02XYZ789' },
  ])('accepts %j', (delivery) => {
    expect(Delivery.parse(delivery)).toEqual(delivery);
  });

  it.each([
    ['an ftp URL', { channel: 'webhook', url: 'ftp://example.com/file' }],
    [
      'a whsec_ secret that is not base64 of 24–64 bytes',
      { channel: 'webhook', url: 'https://a.example', secret: 'whsec_123' },
    ],
    ['a relative URL', { channel: 'webhook', url: '/hooks/keel' }],
    ['a scheme-relative URL', { channel: 'webhook', url: '//example.com/hook' }],
    ['a URL without a host', { channel: 'webhook', url: 'https:///hook' }],
    ['a URL with credentials', { channel: 'webhook', url: 'https://user:pass@example.com/hook' }],
    ['a URL with a space', { channel: 'webhook', url: 'https://example.com/a b' }],
    ['a webhook without a URL', { channel: 'webhook' }],
    ['an empty secret', { channel: 'webhook', url: 'https://example.com', secret: '' }],
    ['a Slack channel name', { channel: 'slack', target: '#general' }],
    ['a Slack id of another kind', { channel: 'slack', target: 'X123' }],
    ['a lower-case Slack id', { channel: 'slack', target: 'c0123abcd' }],
    ['a too-short Slack id', { channel: 'slack', target: 'C1' }],
    ['slack without a target', { channel: 'slack' }],
    ['an unknown channel', { channel: 'email', to: 'a@example.com' }],
    ['an unknown field', { channel: 'none', url: 'https://example.com' }],
  ])('refuses %s', (_what, delivery) => {
    expect(Delivery.safeParse(delivery).success).toBe(false);
  });

  it('is checked inside a message body', () => {
    expect(
      SubmitMessageBody.safeParse({ text: 'hi', delivery: { channel: 'slack', target: '#general' } }).success,
    ).toBe(false);
    expect(SubmitMessageBody.safeParse({ text: 'hi', delivery: NO_DELIVERY }).success).toBe(true);
  });

  it('outcomeKind reads the kind of an outcome', () => {
    expect(outcomeKind('delivered')).toBe('delivered');
    expect(outcomeKind('skipped:no target')).toBe('skipped');
    expect(outcomeKind('dropped:channel_not_found')).toBe('dropped');
    expect(outcomeKind('error:HTTP 500: a:b')).toBe('error');
  });
});

describe('assertValidInbound', () => {
  const valid: InboundMessage = { messageId: 'm-1', text: 'hello', mode: 'queue' };

  it('accepts a valid message', () => {
    expect(() => assertValidInbound(valid)).not.toThrow();
    expect(() =>
      assertValidInbound({ ...valid, author: 'ada', delivery: { channel: 'slack', target: 'owner' } }),
    ).not.toThrow();
  });

  it('names the field and the rule of an empty text', () => {
    expect(() => assertValidInbound({ ...valid, text: '  ' })).toThrow('invalid message: text: text must not be empty');
  });

  it('names the size limit of a text too large', () => {
    expect(() => assertValidInbound({ ...valid, text: 'a'.repeat(32769) })).toThrow(
      'invalid message: text: text must be at most 32768 UTF-8 bytes',
    );
  });

  it('names the nested path of a bad delivery', () => {
    const msg = { ...valid, delivery: { channel: 'webhook', url: 'ftp://x' } } as unknown as InboundMessage;
    expect(() => assertValidInbound(msg)).toThrow('invalid message: delivery.url: must be an absolute http(s) URL');
  });

  it('refuses an unknown mode', () => {
    expect(() => assertValidInbound({ ...valid, mode: 'shout' } as unknown as InboundMessage)).toThrow(
      /^invalid message: mode: /,
    );
  });

  it('requires a messageId', () => {
    const { messageId: _omit, ...rest } = valid;
    expect(() => assertValidInbound(rest as InboundMessage)).toThrow('invalid message: messageId is required');
    expect(() => assertValidInbound({ ...valid, messageId: '' })).toThrow(/^invalid message: messageId: /);
  });
});
