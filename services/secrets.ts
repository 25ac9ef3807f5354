import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Secrets at rest (a tool server's header values and environment): AES-256-GCM under KEEL_SECRETS_KEY, a list of
 * `keyId:base64key` pairs whose first one seals. Each sealed value names the key that sealed it, so keys rotate
 * without re-sealing what is stored. Only fingerprints ever leave Keel: `hasSecret` and the first 8 hex characters of
 * the value's SHA-256.
 */
export interface SecretBox {
  seal(plain: string): string;
  open(sealed: string): string;
}

const FORMAT = 'v1';

/** The keys of KEEL_SECRETS_KEY, first the one that seals; an error names what is wrong without quoting a key. */
export function parseSecretKeys(raw: string): Map<string, Buffer> {
  const keys = new Map<string, Buffer>();
  raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .forEach((pair, i) => {
      const colon = pair.indexOf(':');
      const id = pair.slice(0, Math.max(colon, 0));
      const key = Buffer.from(pair.slice(colon + 1), 'base64');
      if (colon <= 0 || !/^[\w-]{1,32}$/.test(id))
        throw new Error(`KEEL_SECRETS_KEY: key ${i + 1} is not keyId:base64key (keyId: letters, digits, _ or -)`);
      if (key.length !== 32) throw new Error(`KEEL_SECRETS_KEY: key ${id} is ${key.length} bytes; AES-256 needs 32`);
      keys.set(id, key);
    });
  if (keys.size === 0) throw new Error('KEEL_SECRETS_KEY: no key');
  return keys;
}

export function secretBox(keys: Map<string, Buffer>): SecretBox {
  const [sealingId, sealingKey] = [...keys.entries()][0]!;
  return {
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', sealingKey, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return [FORMAT, sealingId, iv, body, cipher.getAuthTag()]
        .map((p) => (Buffer.isBuffer(p) ? p.toString('base64') : p))
        .join('.');
    },
    open(sealed) {
      const [format, id, iv, body, tag] = sealed.split('.');
      const key = keys.get(id ?? '');
      if (format !== FORMAT || !key || iv === undefined || body === undefined || tag === undefined)
        throw new Error(`a stored secret is sealed with key "${id}", which KEEL_SECRETS_KEY does not hold`);
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
      decipher.setAuthTag(Buffer.from(tag, 'base64'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
    },
  };
}

/** The box of KEEL_SECRETS_KEY; one that refuses every secret when it is unset. */
export function secretBoxOf(secretsKey: string | undefined): SecretBox {
  return secretsKey ? secretBox(parseSecretKeys(secretsKey)) : NO_SECRET_BOX;
}

/** A box that refuses: secrets cannot be stored when no key is configured. */
export const NO_SECRET_BOX: SecretBox = {
  seal() {
    throw new SecretsUnavailableError();
  },
  open() {
    throw new SecretsUnavailableError();
  },
};

export class SecretsUnavailableError extends Error {
  constructor() {
    super('secrets cannot be stored or read: KEEL_SECRETS_KEY is not set');
    this.name = 'SecretsUnavailableError';
  }
}

/** What a person may see of a secret: that it is there, and which one it is. */
export function secretFingerprint(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex').slice(0, 8);
}

/** A fresh key in KEEL_SECRETS_KEY's form (npm start writes one into its data folder). */
export function newSecretKey(id = 'dev'): string {
  return `${id}:${randomBytes(32).toString('base64')}`;
}
