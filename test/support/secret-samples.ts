import { createHash } from 'node:crypto';

/**
 * Fake secrets in the formats of the secret rules (domain/secret-scan.ts), none of them a real credential. Each is
 * assembled at runtime from a rule's fixed prefix and characters derived from a hash of a label, so that no file of
 * the repository holds a contiguous credential-shaped string for a scanner (GitHub push protection) to flag.
 */
export interface SecretSample {
  /** The sample's name in test titles. */
  name: string;
  /** The rule that must find it. */
  rule: string;
  /** Text carrying the secret, as a reply, a memory line or a tool result would. */
  text: string;
  /** The secret itself: no refusal may repeat it. */
  secret: string;
}

const ALPHABETS = {
  upper: 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
  base32: 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567',
  upperDigits: 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
  lowerDigits: 'abcdefghijklmnopqrstuvwxyz0123456789',
  letters: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz',
  alnum: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789',
  word: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_',
  urlSafe: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-',
  hex: '0123456789abcdef',
} as const;

/** `n` characters of an alphabet, the same every run: SHA-256 of the label, chained. */
export function fake(label: string, n: number, alphabet: keyof typeof ALPHABETS): string {
  const chars = ALPHABETS[alphabet];
  let out = '';
  let block = createHash('sha256').update(`keel fake secret ${label}`).digest();
  while (out.length < n) {
    for (const byte of block) if (out.length < n) out += chars[byte % chars.length];
    block = createHash('sha256').update(block).digest();
  }
  return out;
}

const b64url = (s: string) => Buffer.from(s).toString('base64url');
const sample = (name: string, rule: string, secret: string, text = `Here it is: ${secret} (keep it safe).`) => ({
  name,
  rule,
  secret,
  text,
});

const jwt = [
  b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' })),
  b64url(JSON.stringify({ sub: 'fake-keel-test-user', name: 'Not A Real User', iat: 1700000000 })),
  fake('jwt signature', 43, 'urlSafe'),
].join('.');

const pem = [
  '-----BEGIN ' + 'PRIVATE' + ' KEY-----',
  fake('pem 1', 64, 'alnum'),
  fake('pem 2', 64, 'alnum'),
  fake('pem 3', 40, 'alnum') + '==',
  '-----END ' + 'PRIVATE' + ' KEY-----',
].join('\n');

const airtable = 'pat' + fake('airtable', 14, 'alnum') + '.' + fake('airtable hex', 64, 'hex');
const apiKeyValue = fake('api key value', 32, 'alnum');
const passwordValue = fake('password value', 20, 'alnum');
const symbolPassword = `${fake('symbol password a', 8, 'alnum')}#${fake('symbol password b', 6, 'alnum')}!7`;

/** The formats the issue names first: AWS, JWT, PEM, Stripe, GitHub fine-grained, Slack webhooks, assignments. */
export const REQUIRED_SAMPLES: readonly SecretSample[] = [
  sample('an AWS access key id', 'aws-access-token', 'AKIA' + fake('aws', 16, 'base32')),
  sample('a JWT', 'jwt', jwt),
  sample('a PEM private key block', 'private-key', pem, `Your key:\n${pem}\nStore it safely.`),
  sample('a Stripe secret key', 'stripe-access-token', 'sk_' + 'live_' + fake('stripe', 24, 'alnum')),
  sample('a GitHub fine-grained token', 'github-fine-grained-pat', 'github_' + 'pat_' + fake('github', 82, 'word')),
  sample(
    'a Slack webhook URL',
    'slack-webhook-url',
    'https://hooks.' +
      'slack.com/services/T' +
      fake('slack t', 8, 'upperDigits') +
      '/B' +
      fake('slack b', 10, 'upperDigits') +
      '/' +
      fake('slack secret', 24, 'alnum'),
  ),
  sample('an api_key= assignment', 'generic-api-key', apiKeyValue, `Use this in your config: api_key=${apiKeyValue}`),
  sample('a password: assignment', 'generic-api-key', passwordValue, `db settings: password: ${passwordValue}`),
  sample(
    'a password with symbols',
    'keel-password-assignment',
    symbolPassword,
    `Set it like this: password = "${symbolPassword}"`,
  ),
];

/** A spread of gitleaks' other rules, with the RE2 constructs their translation had to handle. */
export const MORE_SAMPLES: readonly SecretSample[] = [
  sample('a GitLab token', 'gitlab-pat', 'glpat-' + fake('gitlab', 20, 'urlSafe')),
  sample('an npm token', 'npm-access-token', 'npm_' + fake('npm', 36, 'lowerDigits')),
  sample(
    'a SendGrid key',
    'sendgrid-api-token',
    'SG.' + fake('sendgrid a', 22, 'alnum') + '.' + fake('sg b', 43, 'alnum'),
  ),
  sample('a Hugging Face token (a scoped (?i:) group)', 'huggingface-access-token', 'hf_' + fake('hf', 34, 'letters')),
  sample('an Anthropic key', 'anthropic-api-key', 'sk-ant-' + 'api03-' + fake('anthropic', 93, 'urlSafe') + 'AA'),
  sample('a Shopify token', 'shopify-access-token', 'shpat_' + fake('shopify', 32, 'hex')),
  sample('a DigitalOcean token', 'digitalocean-pat', 'dop_' + 'v1_' + fake('digitalocean', 64, 'hex')),
  sample('a Twilio key', 'twilio-api-key', 'SK' + fake('twilio', 32, 'hex')),
  sample('a Vault service token', 'vault-service-token', 'hvs.' + fake('vault', 95, 'urlSafe')),
  sample('a Linear key (an inline (?i) midway)', 'linear-api-key', 'lin_' + 'api_' + fake('linear', 40, 'alnum')),
  sample('a Doppler token', 'doppler-api-token', 'dp.' + 'pt.' + fake('doppler', 43, 'alnum')),
  sample(
    'a Postman key',
    'postman-api-token',
    'PMAK-' + fake('postman a', 24, 'hex') + '-' + fake('postman b', 34, 'hex'),
  ),
  sample(
    'an Airtable token (a POSIX class; its keyword is "airtable")',
    'airtable-personnal-access-token',
    airtable,
    `Your Airtable token is ${airtable}`,
  ),
  sample('an OpenShift token (\\z)', 'openshift-user-token', 'sha256' + '~' + fake('openshift', 43, 'urlSafe')),
  sample(
    'a 1Password secret key',
    '1password-secret-key',
    ['A3', fake('1p a', 6, 'upperDigits'), fake('1p b', 11, 'upperDigits'), fake('1p c', 5, 'upperDigits')]
      .concat([fake('1p d', 5, 'upperDigits'), fake('1p e', 5, 'upperDigits')])
      .join('-'),
  ),
  sample('a PyPI token', 'pypi-upload-token', 'pypi-' + 'AgEIcHlwaS5vcmc' + fake('pypi', 60, 'urlSafe')),
  sample('a base64-encoded JWT (named groups)', 'jwt-base64', Buffer.from(jwt).toString('base64')),
];

export const SECRET_SAMPLES: readonly SecretSample[] = [...REQUIRED_SAMPLES, ...MORE_SAMPLES];

/** The secret in pieces of at most three characters: code that joins them at runtime holds no secret itself. */
export const inPieces = (secret: string): string[] => secret.match(/[\s\S]{1,3}/g) ?? [];
