import type { DataConverter, PayloadCodec } from '@temporalio/common';
import { EncryptionCodec } from '../adapters/payload-codec';
import { loadConfig, type KeelConfig } from '../domain/config';
import { parseKeyRing, sealingKey } from '../domain/key-ring';

// The codec chain as the SDK runs it, for the API's codec server and the readers of histories.
export { decodeWith, encodeWith } from '../adapters/payload-codec';

/** What a Keel process uses for Temporal's payloads: its codecs (none: clear text), and a line saying which. */
export interface PayloadEncryption {
  codecs: PayloadCodec[];
  /** The data converter every client and worker of the process takes. */
  dataConverter: DataConverter;
  describe: string;
}

/**
 * The encryption a process (`who`: "worker", "API", a script's name) runs with. Keys seal every payload. Without
 * keys production refuses to start, unless KEEL_PAYLOAD_ENCRYPTION=off says it is on purpose; development runs in
 * clear text and says so (npm start makes a development key instead).
 */
export function payloadEncryption(payloads: KeelConfig['payloads'], who: string): PayloadEncryption {
  if (payloads.encryption === 'off') return clear('off (KEEL_PAYLOAD_ENCRYPTION=off)');
  if (payloads.keys) {
    const ring = parseKeyRing(payloads.keys, 'KEEL_PAYLOAD_KEYS');
    const codec = new EncryptionCodec(ring);
    const describe = `AES-256-GCM, key ${sealingKey(ring).id}`;
    return { codecs: [codec], dataConverter: { payloadCodecs: [codec] }, describe };
  }
  if (payloads.encryption === 'on' || payloads.production) {
    throw new Error(
      `refusing to start the ${who} without KEEL_PAYLOAD_KEYS: Temporal would hold every message in clear text. ` +
        'Set KEEL_PAYLOAD_KEYS (keyId:base64key), or KEEL_PAYLOAD_ENCRYPTION=off to run without encryption on purpose',
    );
  }
  return clear('off (no KEEL_PAYLOAD_KEYS: development only)');
}

const clear = (describe: string): PayloadEncryption => ({ codecs: [], dataConverter: {}, describe });

/** The encryption of a process whose settings are `env` (a script's own, or a stack's it started). */
export const payloadEncryptionOfEnv = (env: Record<string, string | undefined>, who: string): PayloadEncryption =>
  payloadEncryption(loadConfig(env).payloads, who);
