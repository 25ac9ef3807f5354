/** Times as a person reads them: spans in the largest unit that fits, instants in the reader's own zone. */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`;

/**
 * A span: minutes under an hour (at least 1: "waiting 1 min" reads better than "0 min"), hours under two days,
 * days beyond. Rounded, so a 7-day wait that began a second ago still reads 7 days.
 */
export function span(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < HOUR) return `${Math.max(1, Math.round(abs / MINUTE))} min`;
  if (abs < 2 * DAY) return plural(Math.round(abs / HOUR), 'hour');
  return plural(Math.round(abs / DAY), 'day');
}

/** "waiting 3 min" since `iso`. */
export const waitingFor = (iso: string, now = Date.now()) => `waiting ${span(now - Date.parse(iso))}`;

/** "expires in 7 days", or "expired 2 hours ago". */
export function expiresIn(iso: string, now = Date.now()): string {
  const left = Date.parse(iso) - now;
  return left > 0 ? `expires in ${span(left)}` : `expired ${span(left)} ago`;
}

/** "3 min ago" / "in 2 hours". */
export function relative(iso: string, now = Date.now()): string {
  const d = Date.parse(iso) - now;
  return d > 0 ? `in ${span(d)}` : `${span(d)} ago`;
}

const instantFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** An instant in the reader's zone, e.g. "2 Dec 2026, 09:00". */
export const instant = (iso: string) => instantFormat.format(new Date(iso));

/** A whole count of a large unit and what is left in a small one: "3 min 4 s", or "3 min" when nothing is left. */
const twoUnits = (large: number, largeUnit: string, small: number, smallUnit: string) =>
  small ? `${large} ${largeUnit} ${small} ${smallUnit}` : `${large} ${largeUnit}`;

/** How long something took: "850 ms", "1.2 s", "42 s", "3 min 4 s", "2 h 5 min". */
export function duration(ms: number): string {
  if (Math.round(ms) < 1000) return `${Math.round(ms)} ms`;
  // A tenth of a second still tells short runs apart; above ten seconds it is noise.
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return twoUnits(Math.floor(seconds / 60), 'min', seconds % 60, 's');
  return twoUnits(Math.floor(seconds / 3600), 'h', Math.floor((seconds % 3600) / 60), 'min');
}
