/**
 * A timestamptz as a list's sort key holds it: ISO-8601 UTC to the microsecond, which PostgreSQL reads back exactly
 * (a JS Date keeps milliseconds only, so a page would start before or after rows of the same millisecond).
 */
export const exactInstant = (column: string) =>
  `to_char((${column}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** One page of a list: at most `limit` rows, those after `after` (the sort key of the last row of the page before). */
export interface PageRequest<K> {
  after?: K;
  limit: number;
}

/** `text` as a LIKE pattern that matches it literally anywhere (`\` is the escape character). */
export const containing = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
