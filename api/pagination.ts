import { z } from 'zod';
import { ApiError } from './errors';
import { wholeNumber } from './schemas';

/**
 * The lists' one way of paging: an opaque cursor (base64url of the JSON of the last item's sort key) and a limit. A
 * cursor the API did not give is a 400, never a query PostgreSQL refuses.
 */

const CURSOR_PATTERN = /^[A-Za-z0-9_-]{1,2048}$/;
const NOT_OURS = 'cursor is not one this API gave: pass the nextCursor of the previous page, or none for the first';

// The cursor's form is checked by decodeCursor, not here, so that every cursor the API did not give is refused alike.
export const PageQuery = z.object({
  cursor: z.string().optional().describe('nextCursor of the previous page (opaque); none for the first page'),
  limit: wholeNumber(1, 100).default(50),
});

/** A page of `item`s: `nextCursor` is null on the last page. */
export const Page = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    nextCursor: z.string().nullable().describe('`cursor` for the next page; null on the last'),
  });

/**
 * A timestamp part of a sort key, as db/page.ts writes it (microseconds, UTC). Checked as a real instant here, so
 * that PostgreSQL never meets one it cannot read.
 */
export const CursorInstant = z
  .string()
  .regex(/^[1-9]\d{3}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/)
  .refine((s) => {
    const ms = `${s.slice(0, 23)}Z`;
    const d = new Date(ms);
    return !Number.isNaN(d.getTime()) && d.toISOString() === ms;
  });

/** A text part of a sort key: any text PostgreSQL can take as a parameter. */
// eslint-disable-next-line no-control-regex -- NUL is exactly the character refused
export const CursorText = z.string().regex(/^[^\u0000]{1,1000}$/);

export const encodeCursor = (key: unknown): string => Buffer.from(JSON.stringify(key)).toString('base64url');

/** The sort key a cursor holds, of the shape `key` says; undefined without a cursor (the first page). */
export function decodeCursor<T>(cursor: string | undefined, key: z.ZodType<T>): T | undefined {
  if (cursor === undefined) return undefined;
  if (!CURSOR_PATTERN.test(cursor)) throw new ApiError(400, 'invalid_cursor', NOT_OURS);
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new ApiError(400, 'invalid_cursor', NOT_OURS);
  }
  const parsed = key.safeParse(raw);
  if (!parsed.success) throw new ApiError(400, 'invalid_cursor', NOT_OURS);
  return parsed.data;
}

/**
 * A page from rows read one past the limit (whether another page exists, without a second query): the items, and a
 * cursor of the last one's sort key when there is more.
 */
export function pageOf<R, I>(
  rows: readonly R[],
  limit: number,
  sortKey: (row: R) => unknown,
  view: (row: R) => I,
): { items: I[]; nextCursor: string | null } {
  const shown = rows.slice(0, limit);
  const last = shown[shown.length - 1];
  return { items: shown.map(view), nextCursor: rows.length > limit && last ? encodeCursor(sortKey(last)) : null };
}
