import { Cron } from 'croner';

/** Month and weekday names: their letters are not the L, W, # and ? that `cronRefusal` looks for. */
const NAMES = /\b(JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SUN|MON|TUE|WED|THU|FRI|SAT)\b/gi;

/**
 * Why a cron expression is refused, or undefined: exactly 5 fields, and only what Temporal's Schedules (which fire
 * it) read as croner (which computes its fires here) does: numbers, names, *, ranges, steps and lists. Jobs and
 * routines alike.
 */
export function cronRefusal(expr: string): string | undefined {
  if (expr.startsWith('@')) return 'cron nicknames such as @daily are not accepted: write the 5 fields';
  const fields = expr.split(/\s+/);
  if (fields.length !== 5) return 'cron must have exactly 5 fields (minute hour day-of-month month day-of-week)';
  if (/[LW#?]/i.test(expr.replace(NAMES, ''))) {
    return 'cron may use numbers, month and weekday names, *, -, / and , (not L, W, # or ?)';
  }
  if (fields[2] !== '*' && fields[4] !== '*') {
    return 'cron may restrict day-of-month or day-of-week, not both (cron and Temporal combine them differently)';
  }
  return undefined;
}

/** A 5-field cron as croner reads it in a zone, only to compute fires; throws when it does not parse. */
export function parseCron(expr: string, timezone: string): Cron {
  return new Cron(expr, { timezone, mode: '5-part', paused: true });
}

/** The IANA zone as Temporal spells it (`america/new_york` → `America/New_York`), or undefined. */
export function canonicalTimeZone(tz: string): string | undefined {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}
