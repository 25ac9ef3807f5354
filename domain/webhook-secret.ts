/**
 * A webhook Delivery's `secret`, in one of two forms:
 * - `whsec_<base64>`, the Standard Webhooks serialization: the HMAC key is the decoded bytes, 24 to 64 of them as the
 *   spec asks of a random signing secret; a receiver hands the same string to its Standard Webhooks library;
 * - anything else, as Keel accepted before signatures followed the spec: the HMAC key is the secret's UTF-8 bytes.
 */
export const WHSEC_PREFIX = 'whsec_';

/**
 * How Keel stores a secret (services/delivery-secrets.ts): `keel-sealed:<fingerprint>:<sealed>`. A person's secret
 * may not begin so, or it would be taken for a sealed one.
 */
export const SEALED_SECRET_PREFIX = 'keel-sealed:';

// Standard, padded base64 only: that is what receivers' libraries decode (no URL-safe alphabet, no missing padding).
// Full 4-character groups carry 3 bytes each: 8–20 groups plus an optional 1- or 2-byte tail is 24–62 bytes,
// and 21 groups (63 bytes) may add a 1-byte tail (64).
const GROUP = '[A-Za-z0-9+/]{4}';
const TAIL = '(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)';

/**
 * Accepts a plain secret (not beginning `keel-sealed:`), or a `whsec_` secret that is padded base64 of 24–64 bytes.
 * A pattern rather than a refinement, so that the OpenAPI document states it; a malformed `whsec_` secret is refused
 * where a Delivery is accepted instead of every delivery to it being dropped later.
 */
const WHSEC_BODY = `(?:(?:${GROUP}){8,20}${TAIL}?|(?:${GROUP}){21}(?:[A-Za-z0-9+/]{2}==)?)`;
export const WEBHOOK_SECRET_PATTERN = new RegExp(
  `^(?!${WHSEC_PREFIX}|${SEALED_SECRET_PREFIX})|^${WHSEC_PREFIX}${WHSEC_BODY}$`,
);

export const WEBHOOK_SECRET_MESSAGE =
  'a whsec_ secret must be whsec_ followed by the padded base64 of 24–64 bytes, ' +
  `and no secret may begin ${SEALED_SECRET_PREFIX}`;
