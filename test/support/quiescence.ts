import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { IDLE_TIMER_SUMMARY } from '../../contracts/conversation';

/**
 * Whether a workflow's current run is at rest: it has closed, or its last workflow task has completed and no
 * activity or timer it started is still open (a conversation's idle timer aside: it only closes the run). A run at
 * rest does nothing more until something from outside (a signal, an
 * update) arrives, so a check of "exactly once" made then cannot be overtaken by a second occurrence on its way
 * (a relay waiting out its 500 ms for company is an open timer; a relay turn is an open activity).
 */
export async function quiescent(client: Client, workflowId: string): Promise<boolean> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  if (events.at(-1)?.workflowExecutionCompletedEventAttributes) return true;
  // The last workflow task completed, and none came after it (a task's own commands, such as a timer, may follow).
  const lastTask = [...events]
    .reverse()
    .find(
      (e) =>
        e.workflowTaskScheduledEventAttributes ??
        e.workflowTaskStartedEventAttributes ??
        e.workflowTaskCompletedEventAttributes ??
        e.workflowTaskFailedEventAttributes ??
        e.workflowTaskTimedOutEventAttributes,
    );
  if (!lastTask?.workflowTaskCompletedEventAttributes) return false;
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
    if (e.timerStartedEventAttributes?.timerId && !isIdleTimer(e.userMetadata?.summary))
      openTimers.add(e.timerStartedEventAttributes.timerId);
    const timerClosed = e.timerFiredEventAttributes ?? e.timerCanceledEventAttributes;
    if (timerClosed?.timerId) openTimers.delete(timerClosed.timerId);
  }
  return openActivities.size === 0 && openTimers.size === 0;
}

function isIdleTimer(summary: Parameters<typeof defaultPayloadConverter.fromPayload>[0] | null | undefined): boolean {
  return !!summary && defaultPayloadConverter.fromPayload<string>(summary) === IDLE_TIMER_SUMMARY;
}
