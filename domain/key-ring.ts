/**
 * A ring of AES-256 keys as Keel's settings write them: `keyId:base64key` pairs, comma-separated, the first one the
 * key that seals (KEEL_SECRETS_KEY, KEEL_PAYLOAD_KEYS). Whatever was sealed names its key, so a key added in front
 * rotates without re-sealing what is stored; older keys stay to open it.
 */
export type KeyRing = ReadonlyMap<string, Buffer>;

/** The ring of `setting`'s value; an error names what is wrong without quoting a key. */
export function parseKeyRing(raw: string, setting: string): KeyRing {
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
        throw new Error(`${setting}: key ${i + 1} is not keyId:base64key (keyId: letters, digits, _ or -)`);
      if (key.length !== 32) throw new Error(`${setting}: key ${id} is ${key.length} bytes; AES-256 needs 32`);
      if (keys.has(id)) throw new Error(`${setting}: key id ${id} appears twice`);
      keys.set(id, key);
    });
  if (keys.size === 0) throw new Error(`${setting}: no key`);
  return keys;
}

/** The key that seals: the ring's first. */
export function sealingKey(ring: KeyRing): { id: string; key: Buffer } {
  const [id, key] = [...ring.entries()][0]!;
  return { id, key };
}
