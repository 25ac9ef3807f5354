import { z } from 'zod';

/**
 * A string PostgreSQL can store: U+0000 is refused here, at the edge, because the database rejects it and a
 * message that can never be written must be refused, not retried forever.
 */
export function storableString(): z.ZodString {
  // A pattern, not a refinement, so the OpenAPI document says it too.
  // eslint-disable-next-line no-control-regex -- NUL is exactly the character refused
  return z.string().regex(/^[^\u0000]*$/, 'must not contain the NUL character (U+0000)');
}

/**
 * Holds something besides whitespace: the characters String.prototype.trim removes, spelled out so that the pattern
 * means the same to every regex engine that reads the OpenAPI document (\s differs between JavaScript and Python).
 */
export const NOT_BLANK = /[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;

/** Whether any string in a JSON value holds U+0000 (PostgreSQL's jsonb refuses it). */
export function containsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (Array.isArray(value)) return value.some(containsNul);
  if (value && typeof value === 'object')
    return Object.entries(value).some(([k, v]) => k.includes('\u0000') || containsNul(v));
  return false;
}

/**
 * A value made storable in PostgreSQL text and jsonb: NUL characters removed and lone surrogates replaced, in every
 * string it holds. For values that come from outside Keel's validation (a tool's arguments and results).
 */
export function scrub<T>(value: T): T {
  if (typeof value === 'string')
    return value
      .replaceAll('\u0000', '')
      .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD') as T;
  if (Array.isArray(value)) return value.map(scrub) as T;
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [scrub(k), scrub(v)])) as T;
  return value;
}
