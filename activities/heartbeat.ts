import { Context } from '@temporalio/activity';

/**
 * Heartbeats every `everyMs` while `work` runs, so that a worker killed meanwhile is noticed within the activity's
 * heartbeat timeout instead of its start-to-close timeout. Heartbeats also carry cancellation to the activity.
 * `heartbeat` is the caller's own when its heartbeats carry details.
 */
export async function heartbeatWhile<T>(work: Promise<T>, everyMs = 1_000, heartbeat?: () => void): Promise<T> {
  const ctx = heartbeat ? undefined : Context.current();
  const beat = setInterval(heartbeat ?? (() => ctx?.heartbeat()), everyMs);
  try {
    return await work;
  } finally {
    clearInterval(beat);
  }
}
