import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { parseKeyRing, sealingKey, type KeyRing } from '../domain/key-ring';

/**
 * Secrets at rest (a tool server's header values and environment, a webhook's signing secret): AES-256-GCM under
 * KEEL_SECRETS_KEY, a list of `keyId:base64key` pairs whose first one seals. Each sealed value names the key that
 * sealed it, so keys rotate without re-sealing what is stored. Only fingerprints ever leave Keel: `hasSecret` and the
 * first 8 hex characters of the value's SHA-256.
 *
 * Sealing is deterministic: the nonce is an HMAC of the value under a key derived from the sealing key (a synthetic
 * IV), so one value sealed twice under one key is one string. Stored copies then compare equal when their secrets do
 * (an idempotent re-post, the audit's before and after), and GCM never sees one nonce with two different values.
 * Equality is all it shows, which the fingerprint shows anyway.
 */
export interface SecretBox {
  seal(plain: string): string;
  open(sealed: string): string;
}

const FORMAT = 'v1';

/** The keys of KEEL_SECRETS_KEY, first the one that seals; an error names what is wrong without quoting a key. */
export const parseSecretKeys = (raw: string): KeyRing => parseKeyRing(raw, 'KEEL_SECRETS_KEY');

export function secretBox(keys: KeyRing): SecretBox {
  const { id: sealingId, key: sealing } = sealingKey(keys);
  const ivKey = Buffer.from(hkdfSync('sha256', sealing, Buffer.alloc(0), 'keel secret nonce', 32));
  return {
    seal(plain) {
      const iv = createHmac('sha256', ivKey).update(plain, 'utf8').digest().subarray(0, 12);
      const cipher = createCipheriv('aes-256-gcm', sealing, iv);
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

/** A fresh key in a key ring's form, `id:base64key` (npm start writes its development keys so). */
export function newSecretKey(id = 'dev'): string {
  return `${id}:${randomBytes(32).toString('base64')}`;
}
