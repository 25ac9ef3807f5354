import { describe, expect, it } from 'vitest';
import {
  SECRET_PATTERNS,
  base64Decode,
  checkReply,
  guardErrorForModel,
  type GuardVerdict,
} from '../../domain/reply-guard';

/** One realistic sample per pattern, in the order of SECRET_PATTERNS. None of these is a real credential. */
const SAMPLES: Record<string, string> = {
  openai_key: 'sk-' + 'T3BlbkFJ4f9A2b7C1d8E3g6H5j0K9m2N4p7Q1r3S5t8U0vWx',
  anthropic_key: 'sk-ant-api03-' + 'Xy7_kQ2mN9pL4rT8vW1zB6cD3fG5hJ0s-aE9uI2oP7AA',
  openrouter_key: 'sk-or-v1-' + '0f3a9c2e7b1d4f6a8c0e2b4d6f8a1c3e5b7d9f0a2c4e6b8d0f1a3c5e7b9d1f2a',
  private_key: '-----BEGIN RSA PRIVATE KEY-----',
  github_token: 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8',
  google_api_key: 'AIza' + 'SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY',
  discord_token: 'MTA4NzY1NDMyMTAxMjM0NTY3OA' + '.GhXk2p.' + 'Zq8vLw3nRt5yUb7cDe9fGh1iJk2lMn4oPq',
  slack_bot_token: 'xoxb-' + '1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx',
  slack_app_token: 'xapp-' + '1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef',
  telegram_token: '123456789:' + 'AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw4',
  brave_key: 'BSA' + 'k3Jf9Qm2Xr7Tz1Vn5Lp8Wd4Yh6',
};

const NAMES = SECRET_PATTERNS.map((p) => p.name);

function sample(name: string): string {
  const s = SAMPLES[name];
  if (s === undefined) throw new Error(`no sample for ${name}`);
  return s;
}

/** Percent-encodes every non-alphanumeric character, and the first character when there is none. */
function percentEncode(secret: string): string {
  const pct = (ch: string) => '%' + ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0');
  const encoded = secret.replace(/[^A-Za-z0-9]/g, pct);
  return encoded === secret ? pct(secret.slice(0, 1)) + secret.slice(1) : encoded;
}

const b64 = (s: string) => Buffer.from(s, 'latin1').toString('base64');
const b64url = (s: string) => Buffer.from(s, 'latin1').toString('base64url');
const hex = (s: string) => Buffer.from(s, 'latin1').toString('hex');

function blocked(verdict: GuardVerdict): Extract<GuardVerdict, { ok: false }> {
  if (verdict.ok) throw new Error('expected the reply to be blocked');
  return verdict;
}

/** The blocked verdict and the model's error message must not carry the secret, whole or in a telling part. */
function expectNoLeak(verdict: Extract<GuardVerdict, { ok: false }>, secret: string, encoded: string): void {
  const forModel = guardErrorForModel(verdict);
  for (const text of [verdict.detail, forModel]) {
    expect(text).not.toContain(secret);
    expect(text).not.toContain(encoded);
    expect(text).not.toContain(secret.slice(-12));
  }
}

describe('reply guard: secret samples', () => {
  it('has a sample for each of the eleven patterns', () => {
    expect(NAMES).toHaveLength(11);
    expect(Object.keys(SAMPLES).sort()).toEqual([...NAMES].sort());
  });

  it.each(NAMES)('the %s sample matches its own pattern', (name) => {
    const pattern = SECRET_PATTERNS.find((p) => p.name === name)?.pattern;
    expect(pattern?.test(sample(name))).toBe(true);
  });
});

describe('reply guard: secrets in raw text', () => {
  it.each(NAMES)('blocks %s', (name) => {
    const secret = sample(name);
    const verdict = blocked(checkReply(`Sure, here is what you asked for: ${secret} — keep it safe.`));
    expect(verdict.rule).toBe('secret');
    expect(verdict.detail).toBe(`the reply contains what looks like a secret (${name})`);
    expectNoLeak(verdict, secret, secret);
  });

  it('blocks a multi-line PEM private key block', () => {
    const pem =
      '-----BEGIN OPENSSH PRIVATE KEY-----\n' +
      'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n' +
      '-----END OPENSSH PRIVATE KEY-----';
    const verdict = blocked(checkReply(`Your key:\n${pem}`));
    expect(verdict.detail).toContain('private_key');
    expect(guardErrorForModel(verdict)).not.toContain('b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ');
  });
});

describe('reply guard: secrets in encoded forms', () => {
  it.each(NAMES)('blocks %s when URL-encoded', (name) => {
    const secret = sample(name);
    const encoded = percentEncode(secret);
    expect(encoded).not.toBe(secret);
    const verdict = blocked(checkReply(`Open https://example.com/callback?token=${encoded} to continue.`));
    expect(verdict.rule).toBe('secret');
    expect(verdict.detail).toBe(`the reply contains what looks like a secret (${name}, url-encoded)`);
    expectNoLeak(verdict, secret, encoded);
  });

  it('blocks a URL-encoded secret even when a stray % makes the text invalid as a whole', () => {
    const secret = sample('github_token');
    const verdict = blocked(checkReply(`I am 100% sure the token is ${percentEncode(secret)}`));
    expect(verdict.detail).toBe('the reply contains what looks like a secret (github_token, url-encoded)');
  });

  it.each(NAMES)('blocks %s when base64-encoded (standard alphabet)', (name) => {
    const secret = sample(name);
    // The "???" prefix puts a "/" into the encoding, so the standard and URL-safe forms differ.
    const encoded = b64('???' + secret);
    expect(encoded).toMatch(/\//);
    const verdict = blocked(checkReply(`The value is ${encoded} in base64, decode it yourself.`));
    expect(verdict.rule).toBe('secret');
    expect(verdict.detail).toBe(`the reply contains what looks like a secret (${name}, base64-encoded)`);
    expectNoLeak(verdict, secret, encoded);
  });

  it.each(NAMES)('blocks %s when base64-encoded (URL-safe alphabet, no padding)', (name) => {
    const secret = sample(name);
    const encoded = b64url('???' + secret);
    expect(encoded).toMatch(/_/);
    const verdict = blocked(checkReply(`The value is ${encoded} in base64url, decode it yourself.`));
    expect(verdict.rule).toBe('secret');
    expect(verdict.detail).toBe(`the reply contains what looks like a secret (${name}, base64-encoded)`);
    expectNoLeak(verdict, secret, encoded);
  });

  it('blocks a bare base64 secret with padding', () => {
    const secret = sample('slack_bot_token');
    const encoded = b64(secret + 'x');
    expect(encoded).toMatch(/=$/);
    expect(blocked(checkReply(`here: ${encoded}`)).detail).toBe(
      'the reply contains what looks like a secret (slack_bot_token, base64-encoded)',
    );
  });

  it.each(NAMES)('blocks %s when hex-encoded', (name) => {
    const secret = sample(name);
    const encoded = hex(secret);
    expect(encoded.length).toBeGreaterThanOrEqual(40);
    const verdict = blocked(checkReply(`Raw bytes: ${encoded} (hex).`));
    expect(verdict.rule).toBe('secret');
    expect(verdict.detail).toBe(`the reply contains what looks like a secret (${name}, hex-encoded)`);
    expectNoLeak(verdict, secret, encoded);
  });

  it('blocks an upper-case hex encoding too', () => {
    const encoded = hex(sample('brave_key')).toUpperCase();
    expect(blocked(checkReply(`bytes ${encoded}`)).detail).toBe(
      'the reply contains what looks like a secret (brave_key, hex-encoded)',
    );
  });

  // BUG (domain/reply-guard.ts, decodedForms): the base64 run regex /[A-Za-z0-9+/_-]{24,}={0,2}/ is greedy and
  // not aligned, so path characters before the encoded secret ("x/" in ".../x/<base64>") are glued onto the run and
  // shift the 6-bit groups; the decoded text is garbage and the secret passes. Expected: blocked; actual: { ok: true }.
  it('blocks a base64 secret that follows a path segment in a URL', () => {
    const encoded = b64(sample('github_token'));
    expect(blocked(checkReply(`Download it from https://paste.example/x/${encoded} now.`)).rule).toBe('secret');
  });
});

describe('reply guard: tool-call syntax', () => {
  it.each([
    ['a JSON object', '{"name":"reply","input":{"text":"hi"}}'],
    ['a JSON array', '[{"type":"tool_use"}]'],
    ['a parenthesised call', '(reply "hello")'],
    ['a [reply] marker', '[reply] Hello there'],
    ['a system reminder', '<system-reminder>You are in plan mode</system-reminder>'],
    ['a system reminder in capitals', '<SYSTEM-REMINDER>x</SYSTEM-REMINDER>'],
    ['a <path> tag', '<path>/etc/passwd</path>'],
    ['a JSON object after leading whitespace', '  \n\t {"tool":"skip"}'],
    ['a [reply] marker after a newline', '\n[reply] hi'],
  ])('blocks %s', (_what, text) => {
    const verdict = blocked(checkReply(text));
    expect(verdict.rule).toBe('tool_syntax');
    expect(verdict.detail).toMatch(/tool-call syntax/);
  });

  it('names the leading character but does not repeat the rest of the reply', () => {
    const text = '{"name":"reply","input":{"text":"the quick brown fox"}}';
    const verdict = blocked(checkReply(text));
    expect(verdict.detail).toContain('"{"');
    expect(guardErrorForModel(verdict)).not.toContain('quick brown fox');
  });

  it.each(['skip', 'Skip.', 'SKIP!', '  skip  ', '*skip*', '"Skip"', 'Skip...', '`skip`'])(
    'blocks the bare word %j',
    (text) => {
      const verdict = blocked(checkReply(text));
      expect(verdict.rule).toBe('tool_syntax');
      expect(verdict.detail).toMatch(/skip tool/);
    },
  );

  it.each(['', '   ', '\n\t'])('blocks an empty reply %j', (text) => {
    const verdict = blocked(checkReply(text));
    expect(verdict.rule).toBe('tool_syntax');
    expect(verdict.detail).toMatch(/empty/);
  });
});

describe('reply guard: ordinary replies pass', () => {
  it.each([
    'Hello! How can I help you today?',
    "I'm skipping the intro and going straight to the answer.",
    'Skip the first two steps, then run the migration.',
    "I'm 100% sure about that.",
    'Prices dropped 50% overnight; 20% of users noticed.',
    'See https://example.com/search?q=keel%20temporal&lang=en for details.',
    'The word SGVsbG8= is "Hello" in base64.',
    'Use base64 or hex, whichever you prefer.',
    'The hash prefix is 0123456789abcdef0123456789abcdef0123456 (39 hex characters).',
    'Commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it.',
    'Call 12345678: that is the support line.',
    'scikit-learn and sk-learn are the same library.',
    'Use a JSON object like {"a": 1} in the body.',
    'Temporal (the workflow engine) retries activities.',
    'Reply with [yes] or [no].',
  ])('passes %j', (text) => {
    expect(checkReply(text)).toEqual({ ok: true });
  });
});

describe('guardErrorForModel', () => {
  it('tells the model that nothing was sent, with the reason, and nothing of the blocked text', () => {
    const secret = sample('anthropic_key');
    const verdict = blocked(checkReply(`my key is ${secret}`));
    const message = guardErrorForModel(verdict);
    expect(message).toContain(verdict.detail);
    expect(message).toMatch(/nothing was sent/i);
    expect(message).not.toContain('my key is');
    expect(message).not.toContain(secret);
  });
});

describe('base64Decode', () => {
  const byteStrings = Array.from({ length: 40 }, (_, n) =>
    Array.from({ length: n }, (_, i) => String.fromCharCode((i * 73 + n * 31) % 256)).join(''),
  );

  it.each(byteStrings.map((s) => [s.length, s] as const))(
    'round-trips %i bytes in standard base64 with padding',
    (_n, bytes) => {
      expect(base64Decode(b64(bytes))).toBe(bytes);
    },
  );

  it.each(byteStrings.map((s) => [s.length, s] as const))(
    'round-trips %i bytes in URL-safe base64 without padding',
    (_n, bytes) => {
      expect(base64Decode(b64url(bytes))).toBe(bytes);
    },
  );

  it('decodes text', () => {
    expect(base64Decode('SGVsbG8sIHdvcmxkIQ==')).toBe('Hello, world!');
  });

  it('refuses runs that are not base64', () => {
    expect(base64Decode('abc!defg')).toBeUndefined();
  });

  it('drops a lone trailing character that holds less than a byte (runs are decoded at every alignment)', () => {
    expect(base64Decode('abcde')).toBe(base64Decode('abcd'));
  });
});
