import type { JobSchedule, Routine } from './api-types';
import { instant } from './time';

const UNITS: [ms: number, unit: string][] = [
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1000, 'second'],
];

/** An interval in the largest whole unit: 3600000 → "1 hour", 5400000 → "90 minutes". */
export function interval(ms: number): string {
  for (const [size, unit] of UNITS)
    if (ms >= size && ms % size === 0) return `${ms / size} ${unit}${ms / size === 1 ? '' : 's'}`;
  return `${ms} ms`;
}

/** A job's schedule in words: "every 1 hour", "cron 0 9 * * 1 (Europe/Oslo)", "once at 2 Dec 2026, 09:00". */
export function jobSchedule(s: JobSchedule): string {
  switch (s.kind) {
    case 'every':
      return `every ${interval(s.intervalMs)}`;
    case 'cron':
      return `cron ${s.expr} (${s.tz ?? 'UTC'})`;
    case 'at':
      return `once at ${instant(s.at)}`;
  }
}

/** A routine's schedule as it was given, and the cron it means when that differs: "daily (cron 0 9 * * *, UTC)". */
export function routineSchedule(r: Pick<Routine, 'schedule' | 'cron'>): string {
  const tz = r.schedule.tz ?? 'UTC';
  return r.schedule.expr === r.cron ? `cron ${r.cron} (${tz})` : `${r.schedule.expr} (cron ${r.cron}, ${tz})`;
}

/** "Next fire: <time>" or "No next fire". */
export const nextFire = (at: string | null) => (at ? `Next fire: ${instant(at)}` : 'No next fire');
