import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { METADATA_ENCODING_KEY, ValueError, type Payload, type PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { sealingKey, type KeyRing } from '../domain/key-ring';

/** The encoding an encrypted payload carries, as Temporal's samples and codec servers name it. */
const ENCRYPTED_ENCODING = 'binary/encrypted';
/** The metadata key naming the key that sealed a payload: rotation needs no re-encryption of history. */
const KEY_ID_METADATA = 'encryption-key-id';

const IV_BYTES = 12;
const TAG_BYTES = 16;
const utf8 = (s: string) => Buffer.from(s, 'utf8');

/**
 * Every payload Keel writes to Temporal, sealed with AES-256-GCM under the ring's first key (KEEL_PAYLOAD_KEYS): the
 * whole payload, its metadata included, so the server holds no encoding, no type and no content. Its data is
 * iv ‖ ciphertext ‖ tag. Payloads written before the codec existed are not sealed and decode as they are.
 */
export class EncryptionCodec implements PayloadCodec {
  private readonly sealing: { id: string; key: Buffer };

  constructor(private readonly ring: KeyRing) {
    this.sealing = sealingKey(ring);
  }

  encode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.resolve(payloads.map((p) => this.seal(p)));
  }

  decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.resolve(payloads.map((p) => this.open(p)));
  }

  private seal(payload: Payload): Payload {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.sealing.key, iv);
    const plain = temporal.api.common.v1.Payload.encode(payload).finish();
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    return {
      metadata: { [METADATA_ENCODING_KEY]: utf8(ENCRYPTED_ENCODING), [KEY_ID_METADATA]: utf8(this.sealing.id) },
      data: Buffer.concat([iv, body, cipher.getAuthTag()]),
    };
  }

  private open(payload: Payload): Payload {
    if (!isSealed(payload)) return payload;
    const keyId = Buffer.from(payload.metadata?.[KEY_ID_METADATA] ?? []).toString('utf8');
    const key = this.ring.get(keyId);
    if (!key) throw new ValueError(`a payload is sealed with key "${keyId}", which KEEL_PAYLOAD_KEYS does not hold`);
    const data = Buffer.from(payload.data ?? []);
    if (data.length < IV_BYTES + TAG_BYTES) throw new ValueError('a sealed payload is too short to be one');
    const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES));
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    const plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
    return temporal.api.common.v1.Payload.decode(plain);
  }
}

/** Whether a payload is one the codec sealed. */
function isSealed(payload: Payload): boolean {
  const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
  return encoding !== undefined && encoding !== null && Buffer.from(encoding).toString('utf8') === ENCRYPTED_ENCODING;
}

/** Payloads through a chain of codecs as the SDK runs it: encoding in order, decoding last codec first. */
export async function decodeWith(codecs: readonly PayloadCodec[], payloads: Payload[]): Promise<Payload[]> {
  let out = payloads;
  for (const codec of [...codecs].reverse()) out = await codec.decode(out);
  return out;
}

export async function encodeWith(codecs: readonly PayloadCodec[], payloads: Payload[]): Promise<Payload[]> {
  let out = payloads;
  for (const codec of codecs) out = await codec.encode(out);
  return out;
}
