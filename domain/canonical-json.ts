/**
 * One JSON form of a value, whatever order its objects' keys are in.
 *
 * PostgreSQL's jsonb keeps no key order (it sorts keys, shorter first), so a value read back from a jsonb column is
 * not JSON.stringify-equal to the value that was written. Anything that matches a stored value against a fresh one
 * compares their canonical forms instead. Numbers are written as JSON.stringify writes them: a number's text (1.50,
 * 1e3) is gone once parsed, in the sandbox and in pg alike, so equal numbers have one form.
 */

/** JSON.stringify, with the keys of every object in sorted (UTF-16 code unit) order. */
export function canonicalJson(value: unknown): string {
  return write(value) ?? 'null';
}

/** Whether two JSON values are equal, however their objects' keys are ordered. */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/**
 * A copy whose objects have their keys in canonical order, so that a value reads the same (to Object.keys, to
 * JSON.stringify) whether it is fresh or came back from jsonb. Integer-like keys still come first: JavaScript itself
 * orders them so, the same way every time.
 */
export function inCanonicalOrder(value: unknown): unknown {
  return JSON.parse(canonicalJson(value)) as unknown;
}

/** undefined where JSON.stringify writes nothing (undefined, a function, a symbol). */
function write(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  // A Date (or anything with toJSON) is written as JSON.stringify would write it.
  const toJSON: unknown = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return write((toJSON as () => unknown).call(value));
  if (Array.isArray(value)) return `[${value.map((v: unknown) => write(v) ?? 'null').join(',')}]`;
  const record = value as Record<string, unknown>;
  const fields = Object.keys(record)
    .sort()
    .flatMap((key) => {
      const text = write(record[key]);
      return text === undefined ? [] : [`${JSON.stringify(key)}:${text}`];
    });
  return `{${fields.join(',')}}`;
}
