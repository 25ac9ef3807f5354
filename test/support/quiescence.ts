import type { Client } from '@temporalio/client';

/**
 * Whether a workflow's current run is at rest: its last event is a completed workflow task, and no activity or
 * timer it started is still open. A run at rest does nothing more until something from outside (a signal, an
 * update) arrives, so a check of "exactly once" made then cannot be overtaken by a second occurrence on its way
 * (a relay waiting out its 500 ms for company is an open timer; a relay turn is an open activity).
 */
export async function quiescent(client: Client, workflowId: string): Promise<boolean> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  if (!events.at(-1)?.workflowTaskCompletedEventAttributes) return false;
  const openActivities = new Set<string>();
  const openTimers = new Set<string>();
  for (const e of events) {
    if (e.activityTaskScheduledEventAttributes) openActivities.add(String(e.eventId));
    const closed =
      e.activityTaskCompletedEventAttributes ??
      e.activityTaskFailedEventAttributes ??
      e.activityTaskTimedOutEventAttributes ??
      e.activityTaskCanceledEventAttributes;
    if (closed) openActivities.delete(String(closed.scheduledEventId));
    if (e.timerStartedEventAttributes?.timerId) openTimers.add(e.timerStartedEventAttributes.timerId);
    const timerClosed = e.timerFiredEventAttributes ?? e.timerCanceledEventAttributes;
    if (timerClosed?.timerId) openTimers.delete(timerClosed.timerId);
  }
  return openActivities.size === 0 && openTimers.size === 0;
}
