import type { Transports } from '../adapters/delivery/transport';
import type { Pool } from '../db/pool';
import { passFinished, recordPassFinished, replaceStoredValue, valuesWithClearSecrets } from '../db/stored-secrets';
import type { Delivery } from '../domain/delivery';
import { SEALED_SECRET_PREFIX } from '../domain/webhook-secret';
import { secretFingerprint, SecretsUnavailableError, type SecretBox } from './secrets';

/**
 * A webhook's signing secret is sealed where a person gives it, and opened only where a request is signed. Every copy
 * Keel keeps in between (the agent, job and routine rows, a message's and a turn's delivery, the deliveries ledger, a
 * Temporal payload) holds `keel-sealed:<fingerprint>:<sealed>`, so an answer can show which secret it is without the
 * key. A secret stored in clear before sealing still signs until sealStoredSecrets seals it.
 */
type WebhookDelivery = Extract<Delivery, { channel: 'webhook' }>;

const isSealedSecret = (secret: string): boolean => secret.startsWith(SEALED_SECRET_PREFIX);

/** A sealed secret's two parts: its fingerprint, and the box's sealed value. */
function sealedParts(secret: string): { fingerprint: string; sealed: string } {
  const rest = secret.slice(SEALED_SECRET_PREFIX.length);
  const colon = rest.indexOf(':');
  return { fingerprint: rest.slice(0, colon), sealed: rest.slice(colon + 1) };
}

function sealedSecret(box: SecretBox, secret: string): string {
  return `${SEALED_SECRET_PREFIX}${secretFingerprint(secret)}:${box.seal(secret)}`;
}

/** Which secret it is: the first 8 hex characters of its SHA-256, read from a sealed one without opening it. */
export function shownSecretFingerprint(secret: string): string {
  return isSealedSecret(secret) ? sealedParts(secret).fingerprint : secretFingerprint(secret);
}

const isWebhookWithClearSecret = (v: object): v is WebhookDelivery & { secret: string } => {
  const d = v as Partial<WebhookDelivery>;
  return (
    d.channel === 'webhook' && typeof d.url === 'string' && typeof d.secret === 'string' && !isSealedSecret(d.secret)
  );
};

/** Whether a value holds a webhook Delivery whose secret is still in clear, however deep. */
export function holdsClearSecret(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (isWebhookWithClearSecret(value)) return true;
  return Object.values(value).some(holdsClearSecret);
}

/**
 * The value with every webhook Delivery in it (however deep: a body's `delivery`, an agent's destinations) carrying
 * its secret sealed. What holds none is returned as it is. Throws SecretsUnavailableError when there is a secret to
 * seal and no key.
 */
export function sealSecretsIn<T>(box: SecretBox, value: T): T {
  if (!holdsClearSecret(value)) return value;
  const seal = (v: unknown): unknown => {
    if (typeof v !== 'object' || v === null) return v;
    if (Array.isArray(v)) return v.map(seal);
    if (isWebhookWithClearSecret(v)) return { ...v, secret: sealedSecret(box, v.secret) };
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, seal(x)]));
  };
  return seal(value) as T;
}

/**
 * The transports with a webhook's sealed secret opened just before it signs. A secret the worker's keys cannot open
 * drops the delivery, naming why: no attempt could ever be signed.
 */
export function openingSecrets(transports: Transports, box: SecretBox): Transports {
  const { webhook } = transports;
  return {
    ...transports,
    webhook: {
      channel: 'webhook',
      async send(target, message, signal) {
        if (target.secret === undefined || !isSealedSecret(target.secret)) return webhook.send(target, message, signal);
        let secret: string;
        try {
          secret = box.open(sealedParts(target.secret).sealed);
        } catch {
          return { ok: false, retryable: false, reason: 'secret_unavailable' };
        }
        return webhook.send({ ...target, secret }, message, signal);
      },
    },
  };
}

const SEALING_PASS = 'webhook-secrets-sealed';

/**
 * Seals, once, the webhook secrets stored in clear before Keel sealed them, in every copy it keeps. Without a key
 * nothing can be sealed: the pass waits for a start that has one, and answers how many stored values wait.
 */
export async function sealStoredSecrets(pool: Pool, box: SecretBox): Promise<{ sealed: number; waiting: number }> {
  if (await passFinished(pool, SEALING_PASS)) return { sealed: 0, waiting: 0 };
  const found = await valuesWithClearSecrets(pool);
  let sealed = 0;
  for (const [i, at] of found.entries()) {
    let next: unknown;
    try {
      next = sealSecretsIn(box, at.value);
    } catch (err) {
      if (err instanceof SecretsUnavailableError) return { sealed, waiting: found.length - i };
      throw err;
    }
    if (next === at.value) continue;
    await replaceStoredValue(pool, at, next);
    sealed++;
  }
  await recordPassFinished(pool, SEALING_PASS);
  return { sealed, waiting: 0 };
}
