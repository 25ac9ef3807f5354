import { z } from 'zod';
import { LIMITS } from './limits';

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const wellFormed = (s: string): string => s.replace(LONE_SURROGATE, '\uFFFD');

const NUL_REFUSED = 'must not contain the NUL character (U+0000)';

/**
 * A string PostgreSQL can store: U+0000 is refused here, at the edge, because the database rejects it and a
 * message that can never be written must be refused, not retried forever. A lone surrogate (which a JSON body can
 * carry as `\ud800`) becomes U+FFFD, as a text column would keep it; jsonb refuses it outright.
 */
export function storableString(): z.ZodString {
  return (
    z
      .string()
      // A pattern, not a refinement, so the OpenAPI document says it too.
      // eslint-disable-next-line no-control-regex -- NUL is exactly the character refused
      .regex(/^[^\u0000]*$/, NUL_REFUSED)
      .overwrite(wellFormed)
  );
}

/**
 * Any JSON value (a record's column, a tool call's arguments) that PostgreSQL's jsonb can store: a NUL anywhere in
 * it, keys included, is refused naming where it is, and so is nesting deeper than LIMITS.jsonDepth (JSON.stringify
 * recurses, and a 1 MiB body can nest 500,000 deep: 5,000 was a 500); lone surrogates become U+FFFD.
 */
export function storableJson() {
  return z
    .unknown()
    .superRefine((value, ctx) => {
      const found = unstorable(value, LIMITS.jsonDepth);
      // Not continued: scrub, which recurses, must not meet a value nested too deep.
      if (found) ctx.addIssue({ code: 'custom', ...found, continue: false });
    })
    .overwrite(scrub);
}

/**
 * Holds something besides whitespace: the characters String.prototype.trim removes, spelled out so that the pattern
 * means the same to every regex engine that reads the OpenAPI document (\s differs between JavaScript and Python).
 */
export const NOT_BLANK = /[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;

/** Whether any string in a JSON value holds U+0000 (PostgreSQL's jsonb refuses it). */
export const containsNul = (value: unknown): boolean => unstorable(value, Infinity) !== undefined;

interface Visit {
  value: unknown;
  key?: PropertyKey;
  parent?: Visit;
  depth: number;
}
const pathOf = (v: Visit | undefined): PropertyKey[] => (v?.parent ? [...pathOf(v.parent), v.key!] : []);

/**
 * The first thing in a JSON value that jsonb cannot take, and where: a NUL in a string or a key, or an array or
 * object nested `maxDepth` deep. A walk with a stack of its own, so that no value is too deep for it.
 */
function unstorable(value: unknown, maxDepth: number): { path: PropertyKey[]; message: string } | undefined {
  const stack: Visit[] = [{ value, depth: 0 }];
  for (let at = stack.pop(); at; at = stack.pop()) {
    const v = at.value;
    if (typeof v === 'string' && v.includes('\u0000')) return { path: pathOf(at), message: NUL_REFUSED };
    if (!v || typeof v !== 'object') continue;
    // Named where the value begins: a path 100 deep would say no more.
    if (at.depth >= maxDepth) return { path: [], message: `must not nest arrays or objects over ${maxDepth} deep` };
    const children: [PropertyKey, unknown][] = Array.isArray(v) ? [...v.entries()] : Object.entries(v);
    for (const [key, child] of children.reverse()) {
      const visit = { value: child, key, parent: at, depth: at.depth + 1 };
      if (typeof key === 'string' && key.includes('\u0000')) return { path: pathOf(visit), message: NUL_REFUSED };
      stack.push(visit);
    }
  }
  return undefined;
}

/**
 * A value made storable in PostgreSQL text and jsonb: NUL characters removed and lone surrogates replaced, in every
 * string it holds. For values that come from outside Keel's validation (a tool's arguments and results).
 */
export function scrub<T>(value: T): T {
  if (typeof value === 'string') return wellFormed(value.replaceAll('\u0000', '')) as T;
  if (Array.isArray(value)) return value.map(scrub) as T;
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [scrub(k), scrub(v)])) as T;
  return value;
}

export const DATE_TIME_RULE = 'expected an RFC 3339 date-time, e.g. 2027-01-01T09:00:00Z or 2027-01-01T10:00:00+01:00';

/**
 * A date-time as the OpenAPI document's `format: date-time` promises (RFC 3339: `Z` or any offset up to ±23:59,
 * fractional seconds), given on as the same instant in UTC, written as PostgreSQL's timestamptz reads it. PostgreSQL
 * reads offsets only up to ±15:59 (a +18:55 was a 500) and no year 0000, so nothing takes the text as it came.
 * Nothing RFC 3339 can write is outside timestamptz's range (4713 BC to AD 294276): its extremes are
 * 0000-01-01T00:00:00+23:59, in 2 BC, and 9999-12-31T23:59:59-23:59, in AD 10000. So what is refused is what is not
 * RFC 3339: a year of more than four digits (+294277-01-01T00:00:00Z), a date that does not exist, no offset.
 */
export function dateTime() {
  return z.iso.datetime({ offset: true, error: DATE_TIME_RULE }).transform(utcText);
}

/**
 * The UTC text of an RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`, itself RFC 3339 for the years 1 to 9999; a
 * year before 1 is written as PostgreSQL writes it (`0001-12-31T00:01:00Z BC` is 1 BC), and AD 10000 with five digits.
 * Fractional seconds are kept to the microsecond (PostgreSQL's precision), past JavaScript's milliseconds.
 */
function utcText(value: string): string {
  const [, wholeSeconds = '', fraction = '', offset = ''] = /^(.{19})(\.\d+)?(.*)$/.exec(value) ?? [];
  const d = new Date(`${wholeSeconds}${offset}`);
  const year = d.getUTCFullYear();
  const two = (n: number) => String(n).padStart(2, '0');
  const bc = year < 1;
  const date = `${String(bc ? 1 - year : year).padStart(4, '0')}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}`;
  const time = `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}${fraction.slice(0, 7)}`;
  return `${date}T${time}Z${bc ? ' BC' : ''}`;
}

const UTC_TEXT = /^(\d{4,5})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?Z( BC)?$/;

/** The instant of an RFC 3339 date-time or of `dateTime()`'s UTC text of one (milliseconds); undefined otherwise. */
export function instantOf(value: string): Date | undefined {
  const parsed = dateTime().safeParse(value);
  // Its text of a year before 1 or of AD 10000 is not RFC 3339 itself; anything else that is not is refused.
  const m = UTC_TEXT.exec(parsed.success ? parsed.data : / BC$|^\d{5}-/.test(value) ? value : '');
  if (!m) return undefined;
  const [year = 0, month = 1, day = 1, hours = 0, minutes = 0, seconds = 0] = m.slice(1, 7).map(Number);
  const d = new Date(0);
  // setUTCFullYear, not Date.UTC, which reads the years 0 to 99 as 1900 to 1999.
  d.setUTCFullYear(m[8] ? 1 - year : year, month - 1, day);
  d.setUTCHours(hours, minutes, seconds, Math.floor(Number(`0${m[7] ?? ''}`) * 1000));
  return d.getUTCDate() === day ? d : undefined;
}
