import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkProposal, type Check } from '../../domain/admission';
import { initialMemory } from '../../domain/memory';
import { checkReply, guardErrorForModel } from '../../domain/reply-guard';
import { FAKE_SECRET } from '../../domain/scripted-model';
import { SECRET_RULESET, findSecret, rulesFinding, shannonEntropy } from '../../domain/secret-scan';
import { Unsupported, re2ToJs } from '../../scripts/vendor-secret-rules';
import { REQUIRED_SAMPLES, SECRET_SAMPLES, fake, type SecretSample } from '../support/secret-samples';

const titled = (samples: readonly SecretSample[]) => samples.map((s) => [s.name, s] as const);

/** The reply guard's verdict on a text that must be blocked. */
function blockedDetail(text: string): string {
  const verdict = checkReply(text);
  if (verdict.ok) throw new Error('expected the text to be blocked');
  expect(verdict.rule).toBe('secret');
  return verdict.detail;
}

describe('the vendored ruleset', () => {
  it('is gitleaks v8.30.1 (MIT), 217 of its 222 rules, the 5 path-only rules dropped with the reason', () => {
    expect(SECRET_RULESET).toMatchObject({ name: 'gitleaks', version: 'v8.30.1', licence: 'MIT' });
    expect(SECRET_RULESET.commit).toBe('83d9cd684c87d95d656c1458ef04895a7f1cbd8e');
    expect(SECRET_RULESET.rules).toHaveLength(217);
    expect(SECRET_RULESET.dropped.map((d) => d.id)).toEqual([
      'freemius-secret-key',
      'hashicorp-tf-password',
      'kubernetes-secret-yaml',
      'nuget-config-password',
      'pkcs12-file',
    ]);
    for (const d of SECRET_RULESET.dropped) expect(d.why).toMatch(/file paths only/);
    expect(SECRET_RULESET.keelRules).toEqual(['keel-password-assignment']);
  });

  it('ships with its licence and version in NOTICE next to the data', () => {
    const notice = readFileSync(path.resolve(__dirname, '../../domain/secret-rules/NOTICE'), 'utf8');
    expect(notice).toContain('gitleaks v8.30.1');
    expect(notice).toContain('MIT License');
    expect(notice).toContain('Copyright (c) 2019 Zachary Rice');
  });

  it.each(['aws-access-token', 'jwt', 'private-key', 'stripe-access-token', 'github-fine-grained-pat'])(
    'includes %s',
    (id) => expect(SECRET_RULESET.rules).toContain(id),
  );
  it.each(['slack-webhook-url', 'generic-api-key'])('includes %s', (id) => expect(SECRET_RULESET.rules).toContain(id));
});

describe('RE2 to JavaScript (scripts/vendor-secret-rules.ts)', () => {
  it('turns a leading (?i) that holds for the whole pattern into the i flag', () => {
    expect(re2ToJs('(?i)key[a-z]{2}')).toEqual({ source: 'key[a-z]{2}', flags: 'i' });
  });

  it('expands a (?i) midway to both cases of what follows, up to the end of its group', () => {
    const { source, flags } = re2ToJs('\\b(p8e-(?i)[a-z0-9]{4})x');
    expect(flags).toBe('');
    expect(source).toBe('\\b(p8e-[a-z0-9A-Z]{4})x');
    const re = new RegExp(source, flags);
    expect(re.test('p8e-AbC1x')).toBe(true);
    expect(re.test('P8E-abc1x')).toBe(false);
    expect(re.test('p8e-abc1X')).toBe(false);
  });

  it('expands (?i:…) and keeps (?-i:…) case-sensitive inside a case-insensitive pattern', () => {
    const { source, flags } = re2ToJs('(?i)(?:key|(?-i:[Aa]pi|API))=(?i:ab)');
    expect(flags).toBe('');
    const re = new RegExp(`^${source}$`, flags);
    for (const ok of ['KEY=ab', 'key=AB', 'Api=aB', 'API=Ab']) expect(re.test(ok)).toBe(true);
    expect(re.test('aPI=ab')).toBe(false);
  });

  it('reads "]" first in a class as a literal, as RE2 does', () => {
    const re = new RegExp(re2ToJs('^[^]]+]$').source);
    expect(re.test('abc]')).toBe(true);
    expect(re.test('a]c]')).toBe(false);
  });

  it('translates POSIX classes, \\z, \\A, (?s) and (?P<name>', () => {
    expect(re2ToJs('pat[[:alnum:]]{2}\\z').source).toBe('pat[0-9A-Za-z]{2}$');
    expect(re2ToJs('\\Aa(?s:.)b.').source).toBe('^a(?:[\\s\\S])b.');
    expect(re2ToJs('(?P<alg>x)').source).toBe('(?<alg>x)');
  });

  it.each([
    ['a Unicode class', '\\pL+'],
    ['an octal escape', 'a\\1'],
    ['the m flag', '(?m)^a$'],
    ['a lookahead (not RE2)', 'a(?=b)'],
  ])('refuses %s', (_what, pattern) => {
    expect(() => re2ToJs(pattern)).toThrow(Unsupported);
  });
});

describe('a secret in each rule format is found', () => {
  it.each(titled(SECRET_SAMPLES))('%s by its rule', (_name, s) => {
    expect(rulesFinding(s.text)).toContain(s.rule);
  });

  it.each(titled(SECRET_SAMPLES))('%s: blocked in a reply, naming a rule and never the secret', (_name, s) => {
    const detail = blockedDetail(s.text);
    const rule = findSecret(s.text)?.rule;
    expect(detail).toBe(`the reply contains what looks like a secret (${rule})`);
    const verdict = checkReply(s.text);
    const forModel = verdict.ok ? '' : guardErrorForModel(verdict);
    for (const said of [detail, forModel]) {
      expect(said).not.toContain(s.secret);
      expect(said).not.toContain(s.secret.slice(-12));
    }
  });

  it.each(titled(REQUIRED_SAMPLES))('%s: blocked base64-, hex- and URL-encoded', (_name, s) => {
    expect(blockedDetail(`b64 ${Buffer.from(s.text).toString('base64')} end`)).toMatch(/, base64-encoded\)$/);
    expect(blockedDetail(`hex ${Buffer.from(s.text).toString('hex')} end`)).toMatch(/, hex-encoded\)$/);
    const pct = (c: string) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`;
    const url = `https://example.com/cb?v=${encodeURIComponent(s.text).replace(/[_.~-]/g, pct)}`;
    expect(blockedDetail(url)).toMatch(/, url-encoded\)$/);
  });

  const memory = initialMemory({ name: 'Ada' });
  const noCredentials = (line: string): Check => {
    const edit = {
      file: 'domain-knowledge.md',
      action: 'edit' as const,
      content: `# Domain knowledge\n\n- ${line}\n`,
      summary: '',
      rationale: '',
      conversationIds: [],
    };
    const checks = checkProposal(memory, { status: 'ok', edits: [edit] }, { urlAllowlist: [] });
    const c = checks.find((x) => x.name === 'no_credentials');
    if (!c) throw new Error('no no_credentials check');
    return c;
  };

  it.each(titled(SECRET_SAMPLES))('%s: fails no_credentials in a proposal, named, not quoted', (_name, s) => {
    const c = noCredentials(s.text);
    expect(c.passed).toBe(false);
    expect(c.detail).toContain(`domain-knowledge.md: ${findSecret(s.text)?.rule}`);
    expect(c.detail).not.toContain(s.secret);
  });

  it('finds a PEM block whose lines a proposal adds one by one (the added lines are scanned together)', () => {
    const pem = REQUIRED_SAMPLES.find((s) => s.rule === 'private-key')?.secret ?? '';
    const body = pem.split('\n').slice(1).join('\n'); // no BEGIN line: the seed pattern cannot see it
    const c = noCredentials(`-----BEGIN EC ${'PRIVATE'} KEY-----\n${body}`);
    expect(c.detail).toMatch(/domain-knowledge\.md: private_key/);
  });
});

describe('how gitleaks decides, applied here', () => {
  it('entropy: an assignment passes at or below 3.5 bits per character and is found above it', () => {
    const low = 'abcabcabcabcabc';
    const high = fake('entropy', 24, 'alnum');
    expect(shannonEntropy(low)).toBeCloseTo(Math.log2(3), 10);
    expect(shannonEntropy(high)).toBeGreaterThan(3.5);
    expect(checkReply(`api_key=${low}`)).toEqual({ ok: true });
    expect(blockedDetail(`api_key=${high}`)).toContain('(generic-api-key)');
  });

  it('shannonEntropy: 0 for one repeated character, 2 bits for four equally frequent ones', () => {
    expect(shannonEntropy('')).toBe(0);
    expect(shannonEntropy('aaaa')).toBe(0);
    expect(shannonEntropy('abcd')).toBe(2);
  });

  it('keywords: a rule runs only when one of its keywords is in the text (Airtable tokens need "airtable")', () => {
    const s = SECRET_SAMPLES.find((x) => x.rule === 'airtable-personnal-access-token');
    if (!s) throw new Error('no Airtable sample');
    expect(rulesFinding(s.text)).toEqual(['airtable-personnal-access-token']);
    expect(rulesFinding(`token ${s.secret}`)).not.toContain('airtable-personnal-access-token');
  });

  it("allowlists: AWS's documented example key id passes; the same shape otherwise is blocked", () => {
    expect(checkReply(`AWS docs use ${'AKIA' + 'IOSFODNN7' + 'EXAMPLE'} as an example.`)).toEqual({ ok: true });
    expect(blockedDetail(`Use ${'AKIA' + 'IOSFODNN7' + 'EXAMPLF'}.`)).toContain('(aws-access-token)');
  });

  it('the password rule allows URLs, e-mail addresses, paths and placeholders', () => {
    for (const value of ['https://x.example/a?b=1', 'ada.lovelace+42@example.com', '/run/secrets/db-2', '${DB_PASS_1}'])
      expect(checkReply(`password: ${value}`)).toEqual({ ok: true });
  });

  it('seed patterns alone (for histories recorded before the ruleset) still block the seed secrets only', () => {
    expect(checkReply(`the key: ${FAKE_SECRET}`, { rules: 'seed' })).toMatchObject({ ok: false, rule: 'secret' });
    const aws = REQUIRED_SAMPLES[0] as SecretSample;
    expect(checkReply(aws.text, { rules: 'seed' })).toEqual({ ok: true });
    expect(checkReply(aws.text)).toMatchObject({ ok: false });
  });
});

describe('false positives: the prose corpus (test/fixtures/prose-corpus.txt)', () => {
  const corpus = readFileSync(path.resolve(__dirname, '../fixtures/prose-corpus.txt'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');

  it('has at least 500 lines of ordinary agent replies', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(500);
  });

  it('0 lines are blocked by the reply guard, and the scanner finds nothing in any', () => {
    expect(corpus.filter((l) => !checkReply(l).ok)).toEqual([]);
    expect(corpus.filter((l) => findSecret(l) !== undefined)).toEqual([]);
  });

  it('nothing is found in the corpus as one long reply either', () => {
    expect(findSecret(corpus.join('\n'))).toBeUndefined();
  });
});
